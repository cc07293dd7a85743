"""The failure rules keyed by their measured class (dmlprof.directml.call_rules): a call inside the class
fails, the nearest call outside it runs (on "meta" tensors standing for the device's)."""
import pytest
import torch

from dmlprof.directml.call_rules import CLASS_RULES, MAX_ELEMENTS, rules_for
from dmlprof.directml.failures import ABORTS, RAISES, failure, may_fail, ruled_ops

DEVICE = "meta"


def on_device(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device=DEVICE)


def test_flip_with_a_negative_dim_or_of_a_0d_tensor_ends_the_process_and_a_positive_dim_runs():
    x = on_device(3, 4)
    assert failure("aten::flip", (x, [-1]), {}, DEVICE).kind == ABORTS
    assert failure("aten::flip", (on_device(), [0]), {}, DEVICE).kind == ABORTS
    assert failure("aten::flip", (on_device(), []), {}, DEVICE) is None  # measured: runs
    assert failure("aten::flip", (x, [1]), {}, DEVICE) is None
    assert failure("aten::flip", (torch.zeros(3, 4), [-1]), {}, DEVICE) is None  # on the CPU: not DirectML's


def test_the_backward_of_cumsum_along_a_negative_dim_reaches_the_flip_rule():
    seen = []

    class Spy(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.name() == "aten::flip":
                seen.append(failure("aten::flip", args, kwargs or {}, "cpu"))
            return func(*args, **(kwargs or {}))

    x = torch.randn(3, 4, requires_grad=True)
    with Spy():
        x.cumsum(-1).sum().backward()
    assert seen and all(f is not None and f.kind == ABORTS for f in seen)


@pytest.mark.parametrize("op", ["aten::median.dim", "aten::nanmedian.dim"])
def test_median_along_a_dim_ends_the_process_in_its_measured_class_only(op):
    assert failure(op, (on_device(4, dtype=torch.float16), 0), {}, DEVICE).kind == ABORTS
    assert failure(op, (on_device(3, 4), 1), {}, DEVICE).kind == ABORTS
    assert failure(op, (on_device(4), 0), {}, DEVICE) is None  # 1-D float32 runs (a wrong shape: the table's)
    assert failure(op, (on_device(3, 4, dtype=torch.int64), 1), {}, DEVICE) is None  # falls back


def _ln_backward(weight=True, bias=True, mask=(True, True, True)):
    x = on_device(2, 4)
    w, b = (on_device(4) if weight else None), (on_device(4) if bias else None)
    return ("aten::native_layer_norm_backward", (x, x, [4], on_device(2, 1), on_device(2, 1), w, b, list(mask)), {})


def test_layer_norm_backward_fails_unless_input_weight_and_bias_all_require_grad():
    name, args, kwargs = _ln_backward()
    assert failure(name, args, kwargs, DEVICE) is None
    for frozen in ((True, False, True), (True, True, False)):
        name, args, kwargs = _ln_backward(mask=frozen)
        assert failure(name, args, kwargs, DEVICE).kind == ABORTS
    name, args, kwargs = _ln_backward(weight=False, bias=False, mask=(True, False, False))
    assert failure(name, args, kwargs, DEVICE).kind == RAISES
    name, args, kwargs = _ln_backward(mask=(False, True, True))
    assert failure(name, args, kwargs, DEVICE).kind == RAISES
    # measured on realdml (tests/realdml/test_survival.py): a bias without a weight raises; a weight without a
    # bias runs (it lost the device only after its output was read back: not isolated, so no rule)
    name, args, kwargs = _ln_backward(bias=False, mask=(True, True, False))
    assert failure(name, args, kwargs, DEVICE) is None
    name, args, kwargs = _ln_backward(weight=False, mask=(True, False, True))
    assert failure(name, args, kwargs, DEVICE).kind == RAISES


def test_a_copy_to_channels_last_is_refused_with_or_without_a_dtype_change_and_a_plain_copy_runs():
    x = on_device(1, 3, 4, 4)
    cl = torch.channels_last
    assert failure("aten::_to_copy", (x,), {"dtype": torch.float16, "memory_format": cl}, DEVICE).kind == RAISES
    assert failure("aten::_to_copy", (x,), {"memory_format": cl}, DEVICE).kind == RAISES
    assert failure("aten::_to_copy", (x,), {"memory_format": torch.channels_last_3d}, DEVICE).kind == RAISES
    assert failure("aten::_to_copy", (x,), {"dtype": torch.float16}, DEVICE) is None
    assert failure("aten::_to_copy", (x,), {"memory_format": torch.contiguous_format}, DEVICE) is None
    assert failure("aten::_to_copy", (x,), {"memory_format": torch.preserve_format}, DEVICE) is None
    # measured on realdml: a copy to the CPU in channels-last runs; a CPU tensor copied to the device so raises
    assert failure("aten::_to_copy", (x,), {"device": torch.device("cpu"), "memory_format": cl}, DEVICE) is None
    assert failure("aten::_to_copy", (torch.zeros(1, 3, 4, 4),), {"device": torch.device(DEVICE), "memory_format": cl},
                   DEVICE).kind == RAISES


def test_every_way_to_make_a_channels_last_tensor_on_the_device_reaches_the_rule_at_the_kernel_that_refuses():
    """empty.memory_format is the device kernel torch-directml refuses in: the prediction's stand-in and the emulated
    device raise there, under the composites the recorder sees (clone, empty_like, zeros_like, _to_copy)."""
    x, cl = on_device(2, 3, 2, 3), torch.channels_last
    on = {"device": torch.device(DEVICE)}
    assert failure("aten::empty.memory_format", ([2, 3, 2, 3],), {**on, "memory_format": cl}, DEVICE).kind == RAISES
    assert failure("aten::empty.memory_format", ([2, 3, 2, 3],), {**on, "memory_format": None}, DEVICE) is None
    assert failure("aten::empty.memory_format", ([2, 3, 2, 3],), {"device": torch.device("cpu"), "memory_format": cl},
                   DEVICE) is None
    for op in ("aten::clone", "aten::empty_like", "aten::zeros_like"):
        assert failure(op, (x,), {"memory_format": cl}, DEVICE).kind == RAISES, op
        assert failure(op, (x,), {"memory_format": torch.preserve_format}, DEVICE) is None, op
    # the emulated device hands a rule c10::MemoryFormat's code, not torch's object: 2 is channels_last
    assert failure("aten::empty.memory_format", ([2, 3, 2, 3],), {**on, "memory_format": 2}, DEVICE).kind == RAISES
    assert failure("aten::empty.memory_format", ([2, 3, 2, 3],), {**on, "memory_format": 0}, DEVICE) is None


def test_a_channels_last_copy_to_a_dtype_directml_cannot_hold_raises_the_layout_refusal_before_any_abort():
    """Measured on realdml (held-out samples bfloat16|int64|4, chalf|float16|4, cfloat|int64|4): torch-directml
    refuses the layout before it makes the tensor, so the call raises instead of ending the process."""
    x, cl = on_device(2, 3, 2, 3, dtype=torch.int64), torch.channels_last
    for dtype in (torch.bfloat16, torch.complex64, torch.complex32):
        found = failure("aten::_to_copy", (x,), {"dtype": dtype, "memory_format": cl}, DEVICE)
        assert found.kind == RAISES and "memory_format" in found.message, dtype
        assert failure("aten::_to_copy", (x,), {"dtype": dtype}, DEVICE).kind == ABORTS, dtype
        made = failure("aten::empty.memory_format", ([2, 3, 2, 3],),
                       {"dtype": dtype, "device": torch.device(DEVICE), "memory_format": cl}, DEVICE)
        assert made.kind == RAISES, dtype


def test_every_raising_class_rule_names_an_op_the_stand_ins_run_a_kernel_for():
    """A rule acts on the prediction and the emulated device where their kernels ask the rules: ops torch-directml
    registers, ops that reach its CPU fallback, and the composites they give a kernel of their own. A class keyed by
    torch's composites alone (as the channels-last class once was, by _to_copy) would be said by neither, though
    real DirectML raises."""
    from dmlprof.directml.failures import ALWAYS_FAILING_COMPOSITES
    from dmlprof.predict.standin import is_composite
    from dmlprof.tables import load_table

    kernels = set(load_table("dml").registrations["PrivateUse1"]) | set(ALWAYS_FAILING_COMPOSITES)
    for rule in CLASS_RULES:
        if rule.kind == RAISES:
            assert any(op in kernels or not is_composite(op) for op in rule.ops), rule.klass


def test_empty_inputs_of_pad_and_layer_norm_and_gather_from_0d_and_unique_with_counts_or_inverse_raise():
    assert failure("aten::constant_pad_nd", (on_device(0, 3), [1, 1]), {}, DEVICE).kind == RAISES
    assert failure("aten::constant_pad_nd", (on_device(2, 3), [1, 1]), {}, DEVICE) is None
    assert failure("aten::native_layer_norm", (on_device(0, 4), [4], None, None, 1e-5), {}, DEVICE).kind == RAISES
    assert failure("aten::native_layer_norm", (on_device(2, 4), [4], None, None, 1e-5), {}, DEVICE) is None
    index = on_device(dtype=torch.int64)
    assert failure("aten::gather", (on_device(), 0, index), {}, DEVICE).kind == RAISES
    assert failure("aten::gather", (on_device(3), 0, on_device(3, dtype=torch.int64)), {}, DEVICE) is None
    assert failure("aten::_unique2", (on_device(5), True, False, True), {}, DEVICE).kind == RAISES
    assert "inverse" in failure("aten::_unique2", (on_device(5), False, True, False), {}, DEVICE).message
    assert failure("aten::_unique2", (on_device(), False, True, False), {}, DEVICE).kind == RAISES  # 0-d too
    assert failure("aten::_unique2", (on_device(5), True, False, False), {}, DEVICE) is None
    assert failure("aten::unique_dim", (on_device(2, 2), 0, True, True, False), {}, DEVICE) is None  # dim=: runs


def test_unique_of_two_or_more_dimensions_ends_the_process_and_its_flags_still_raise_first():
    # re-probe 10, measured on realdml: torch.unique of any 2-D+ input (float32, int32, int64; (1, 1), (0, 3), (8, 7),
    # (2, 3, 4); sorted or not) dies at "broadcast_sizes.size() >= sizes.size()" (SIGABRT); --target dml said device
    for shape in ((8, 7), (1, 1), (0, 3), (2, 3, 4)):
        found = failure("aten::_unique2", (on_device(*shape), True, False, False), {}, DEVICE)
        assert found is not None and found.kind == ABORTS and found.how == "SIGABRT", shape
    assert failure("aten::_unique2", (on_device(8, 7, dtype=torch.int64), False, False, False), {}, DEVICE).kind == ABORTS
    for shape in ((), (8,), (56,)):  # measured: run
        assert failure("aten::_unique2", (on_device(*shape), True, False, False), {}, DEVICE) is None
    # measured: return_inverse / return_counts of a 2-D input raise their words, before any crash
    assert failure("aten::_unique2", (on_device(8, 7), True, True, False), {}, DEVICE).kind == RAISES
    assert failure("aten::_unique2", (on_device(3, 2), True, False, True), {}, DEVICE).kind == RAISES
    assert failure("aten::unique_dim", (on_device(8, 7), 0, True, False, False), {}, DEVICE) is None  # dim=: runs


@pytest.mark.parametrize("op", ["aten::scatter.src", "aten::scatter_add_", "aten::gather"])
def test_a_negative_dim_past_a_4d_layout_raises_in_scatter_and_gather(op):
    def judged(shape, dim):
        self, index = on_device(*shape), on_device(*shape, dtype=torch.int64)
        args = (self, dim, index) if op == "aten::gather" else (self, dim, index, on_device(*shape))
        found = failure(op, args, {}, DEVICE)
        return "runs" if found is None else found.kind
    for shape, dim in (((5, 5, 5), -2), ((5, 5, 5), -3), ((3, 3, 3, 3), -1), ((2,) * 5, -1)):
        assert judged(shape, dim) == RAISES, (shape, dim)
    for shape, dim in (((5,), -1), ((5, 5), -2), ((5, 5, 5), -1), ((3, 3, 3, 3), 3), ((2,) * 5, 1)):
        assert judged(shape, dim) == "runs", (shape, dim)


def test_repeat_and_tile_to_an_empty_result_raise_a_non_empty_one_runs():
    assert failure("aten::repeat", (on_device(3, 0), [2, 2]), {}, DEVICE).kind == RAISES
    assert failure("aten::repeat", (on_device(0), [3]), {}, DEVICE).kind == RAISES
    assert failure("aten::repeat", (on_device(3, 2), [0, 1]), {}, DEVICE).kind == RAISES
    assert failure("aten::repeat", (on_device(3, 2), [1, 0, 1]), {}, DEVICE).kind == RAISES
    assert failure("aten::repeat", (on_device(3, 2), [2, 3]), {}, DEVICE) is None
    assert failure("aten::repeat", (on_device(3, 2), [1, 1, 1]), {}, DEVICE) is None


def test_reductions_of_six_dims_and_elementwise_ops_of_six_unit_dims_end_the_process_one_fewer_runs():
    assert failure("aten::sum.dim_IntList", (on_device(*[2] * 6), [0]), {}, DEVICE).kind == ABORTS
    assert failure("aten::sum.dim_IntList", (on_device(*[2] * 5), [0]), {}, DEVICE) is None
    assert failure("aten::add.Tensor", (on_device(*[1] * 6), on_device(*[1] * 6)), {}, DEVICE).kind == ABORTS
    assert failure("aten::add.Tensor", (on_device(*[1] * 5), on_device(*[1] * 5)), {}, DEVICE) is None
    assert failure("aten::relu", (on_device(*[2] * 9),), {}, DEVICE) is None  # many dims, none of size 1: runs


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"])
def test_unsigned_and_float8_tensors_on_the_device_end_the_process(name):
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip(f"this torch has no {name}")
    move = {"device": torch.device(DEVICE)}
    assert failure("aten::_to_copy", (torch.zeros(2, dtype=dtype),), move, DEVICE).kind == ABORTS
    assert failure("aten::empty.memory_format", ([2],), {"dtype": dtype, **move}, DEVICE).kind == ABORTS
    assert failure("aten::_to_copy", (torch.zeros(2, dtype=torch.uint8),), move, DEVICE) is None


def test_a_tensor_over_two_to_the_31_elements_on_the_device_ends_the_process():
    move = {"device": torch.device(DEVICE), "dtype": torch.uint8}
    assert failure("aten::empty.memory_format", ([MAX_ELEMENTS + 1],), move, DEVICE).kind == ABORTS
    assert failure("aten::empty.memory_format", ([MAX_ELEMENTS],), move, DEVICE) is None
    assert failure("aten::empty.memory_format", ([MAX_ELEMENTS + 1],), {"dtype": torch.uint8}, DEVICE) is None


def test_every_class_rule_states_its_class_and_evidence_and_reaches_every_path():
    for rule in CLASS_RULES:
        assert rule.klass and rule.evidence and rule.kind in (RAISES, ABORTS)
        assert all(may_fail(op) and op in ruled_ops() for op in rule.ops)
    assert rules_for("flip") and rules_for("aten::median.dim") and not rules_for("gelu")


def test_inside_inference_mode_a_view_of_a_device_tensor_made_outside_it_raises():
    x = on_device(3, 4)
    assert failure("aten::select.int", (x, 0, 0), {}, DEVICE) is None  # outside the mode: runs
    with torch.inference_mode():
        found = failure("aten::select.int", (x, 0, 0), {}, DEVICE)
        made_inside = on_device(3, 4)
        assert failure("aten::t", (made_inside,), {}, DEVICE) is None
    assert found.kind == RAISES and "version_counter" in found.message


def _prelu_weight(channels: int, dims: int):
    """The weight F.prelu hands its kernel: (C, 1, ..., 1) for a per-channel one, (1,) for one weight."""
    return on_device(channels, *[1] * max(dims - 2, 0)) if channels > 1 else on_device(1)


def test_per_channel_prelu_of_4d_and_5d_inputs_ends_the_process_one_weight_runs_to_5d():
    """Re-probe 12 case 23: nn.PReLU(C) after a conv aborts on real torch-directml; nn.PReLU() runs."""
    for shape in ((2, 8, 6, 6), (1, 4, 1, 1), (1, 4, 2, 2, 2)):
        found = failure("aten::_prelu_kernel", (on_device(*shape), _prelu_weight(shape[1], len(shape))), {}, DEVICE)
        assert found.kind == ABORTS and "DML_TENSOR_DIMENSION_COUNT_MAX" in found.message
    for shape in ((4,), (2, 8), (2, 8, 6, 6), (1, 4, 2, 2, 2)):
        assert failure("aten::_prelu_kernel", (on_device(*shape), _prelu_weight(1, len(shape))), {}, DEVICE) is None
    assert failure("aten::_prelu_kernel", (on_device(*[2] * 6), _prelu_weight(1, 6)), {}, DEVICE).kind == ABORTS
    assert failure("aten::_prelu_kernel", (on_device(3, 4), _prelu_weight(4, 2)), {}, DEVICE) is None  # 2-D runs
    assert failure("aten::_prelu_kernel", (on_device(2, 4, 3), _prelu_weight(4, 3)), {}, DEVICE).kind == RAISES
    assert failure("aten::_prelu_kernel", (on_device(4, 4, 3), _prelu_weight(4, 3)), {}, DEVICE) is None
    assert failure("aten::_prelu_kernel", (torch.zeros(2, 8, 6, 6), torch.zeros(8, 1, 1)), {}, DEVICE) is None


def test_per_channel_prelus_backward_raises_for_2d_and_3d_and_ends_the_process_from_5d():
    def backward(shape, channels):
        return (on_device(*shape), on_device(*shape), _prelu_weight(channels, len(shape)))

    assert failure("aten::_prelu_kernel_backward", backward((2, 4), 4), {}, DEVICE).kind == RAISES
    assert failure("aten::_prelu_kernel_backward", backward((1, 4), 4), {}, DEVICE) is None
    assert failure("aten::_prelu_kernel_backward", backward((2, 4, 3, 3, 3), 4), {}, DEVICE).kind == ABORTS
    assert failure("aten::_prelu_kernel_backward", backward((2, 4, 3, 3, 3), 1), {}, DEVICE) is None
    assert failure("aten::_prelu_kernel_backward", backward([2] * 6, 1), {}, DEVICE) is None  # measured: runs


def test_set_of_an_empty_device_tensor_to_a_non_empty_source_ends_the_process_a_non_empty_ones_runs():
    """Re-probe 22, case 11, each call measured on realdml in a process of its own."""
    x, cpu = on_device(4, 3), torch.randn(4, 3)
    for name, args in (("aten::set_.source_Tensor", (on_device(0), x)), ("aten::set_.source_Tensor", (on_device(0), cpu)),
                       ("aten::set_.source_Tensor", (on_device(0), x[1:])),
                       ("aten::set_.source_Storage", (on_device(0), cpu.untyped_storage())),
                       ("aten::set_.source_Storage_storage_offset", (on_device(0), cpu.untyped_storage(), 3, [3, 3],
                                                                     [3, 1]))):
        found = failure(name, args, {}, DEVICE)
        assert found is not None and found.kind == ABORTS and found.how == "SIGSEGV", (name, args)
    assert failure("aten::set_.source_Tensor", (on_device(4, 3), x), {}, DEVICE) is None  # non-empty: runs
    assert failure("aten::set_.source_Tensor", (on_device(2), cpu), {}, DEVICE) is None
    assert failure("aten::set_.source_Tensor", (on_device(0), on_device(0)), {}, DEVICE) is None  # empty source
    assert failure("aten::set_.source_Tensor", (x, x), {}, DEVICE) is None  # x.set_(x)
    assert failure("aten::set_.source_Tensor", (torch.empty(0), x), {}, DEVICE) is None  # a CPU tensor's: raises
    # the device's own storage: none is given on torch-directml; dmlprof's storage copies on the emulated device
    assert failure("aten::set_.source_Storage", (on_device(0), x.untyped_storage()), {}, DEVICE) is None


def test_the_set_crash_comes_with_its_own_fix_not_the_general_compute_it_on_the_cpu():
    from dmlprof.backends.errors import match_known_error
    from dmlprof.directml.failures import DirectMLFailure

    found = failure("aten::set_.source_Tensor", (on_device(0), on_device(4, 3)), {}, DEVICE)
    known = match_known_error(f"RuntimeError: {DirectMLFailure(found)}")
    assert known.key == "dml_set_empty_abort" and "x.clone()" in known.remedy and "p.data = x" in known.remedy
