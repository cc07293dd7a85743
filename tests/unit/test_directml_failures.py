"""The rules of what fails on DirectML, checked on tensors of a stand-in device type ("meta").

Each rule was measured on the real torch-directml (tools/realdml, docs/realdml.md); these tests pin
the rules' edges: a call just inside a rule fails, the same call just outside it runs.
"""
import pytest
import torch

from dmlprof.directml.failures import (
    ABORTS, RAISES, DirectMLFailure, Failure, failure, failure_in, may_fail, ruled_ops,
)
from dmlprof.backends.errors import match_known_error

DEVICE = "meta"


def on_device(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device=DEVICE)


def test_scatter_with_a_negative_dim_fails_where_the_same_scatter_with_its_positive_dim_runs():
    self, index = on_device(3, 4), on_device(3, 1, dtype=torch.int64)
    assert failure("aten::scatter_.value", (self, -1, index, 1.0), {}, DEVICE).kind == RAISES
    assert failure("aten::scatter_.value", (self, 1, index, 1.0), {}, DEVICE) is None


def test_scatter_with_an_index_narrower_than_self_outside_dim_fails():
    self, narrow, full = on_device(2, 4), on_device(2, 2, dtype=torch.int64), on_device(2, 4, dtype=torch.int64)
    assert failure("aten::scatter.src", (self, 0, narrow, on_device(2, 2)), {}, DEVICE) is not None
    assert failure("aten::scatter.src", (self, 0, full, on_device(2, 4)), {}, DEVICE) is None


def test_a_call_with_nothing_on_the_device_is_never_directmls_to_fail():
    cpu_self, cpu_index = torch.zeros(3, 4), torch.zeros(3, 1, dtype=torch.int64)
    assert failure("aten::scatter_.value", (cpu_self, -1, cpu_index, 1.0), {}, DEVICE) is None


def test_eye_on_the_device_ends_the_process_unless_it_is_empty():
    found = failure("aten::eye", (3,), {"device": torch.device(DEVICE)}, DEVICE)
    assert found.kind == ABORTS and found.how == "SIGSEGV"
    assert failure("aten::eye", (0,), {"device": torch.device(DEVICE)}, DEVICE) is None
    assert failure("aten::eye", (3,), {"device": torch.device("cpu")}, DEVICE) is None


@pytest.mark.parametrize("dtype, said", [(torch.complex64, "ComplexFloat"), (torch.complex128, "ComplexDouble"),
                                         (torch.bfloat16, "BFloat16")])
def test_a_dtype_directml_cannot_hold_made_on_the_device_ends_the_process(dtype, said):
    found = failure("aten::zeros", ([3],), {"dtype": dtype, "device": torch.device(DEVICE)}, DEVICE)
    assert found.kind == ABORTS and found.message == f"Invalid or unsupported data type {said}."


def test_moving_a_complex_cpu_tensor_to_the_device_ends_the_process_and_a_real_one_does_not():
    move = {"device": torch.device(DEVICE)}
    assert failure("aten::_to_copy", (torch.zeros(2, dtype=torch.complex64),), move, DEVICE).kind == ABORTS
    assert failure("aten::_to_copy", (torch.zeros(2),), move, DEVICE) is None


def test_an_fft_of_a_real_device_tensor_ends_the_process():
    assert failure("aten::_fft_r2c", (on_device(4, 8), [1], 0, True), {}, DEVICE).kind == ABORTS


def test_float_scalars_fail_only_on_an_adapter_without_float64():
    x = on_device(3)
    assert failure("aten::rsub.Scalar", (x, 1.0), {}, DEVICE, float64=False).message.startswith("The GPU device")
    assert failure("aten::rsub.Scalar", (x, 1.0), {}, DEVICE, float64=True) is None
    assert failure("aten::rsub.Scalar", (x, 1), {}, DEVICE, float64=False) is None  # an int scalar runs
    full = {"device": torch.device(DEVICE)}
    assert failure("aten::full", ([3], 0.5), full, DEVICE, float64=False) is not None
    assert failure("aten::full", ([3], 0.5), {**full, "dtype": torch.float32}, DEVICE, float64=False) is None
    assert failure("aten::full", ([3], 2), full, DEVICE, float64=False) is None


def test_an_abort_is_raised_in_words_that_say_the_process_would_end_and_are_read_back_as_an_abort():
    abort = Failure(ABORTS, "Invalid or unsupported data type ComplexFloat.", "SIGABRT")
    error = RuntimeError(DirectMLFailure(abort).args[0])  # as the emulated device raises it, a plain error
    assert failure_in(error) == abort
    known = match_known_error(f"RuntimeError: {error}")
    assert known is not None and known.key == "dml_complex_abort"


def test_torch_directmls_own_errors_are_read_as_its_refusals_and_others_are_not():
    assert failure_in(RuntimeError("DirectML scatter doesn't allow partially modified dimensions. x")).kind == RAISES
    assert failure_in(ValueError("shapes (3,) and (4,) do not match")) is None


def test_every_ruled_op_is_one_the_cheap_check_lets_through():
    assert all(may_fail(name) for name in ruled_ops())
    assert not may_fail("aten::gelu")  # add, mul and relu are ruled since the size-1 dims rule (call_rules)


def test_torch_directmls_words_from_a_call_with_nothing_on_the_device_are_not_its_refusal():
    words = RuntimeError("Could not run 'aten::_thnn_fused_lstm_cell' with arguments from the 'CPU' backend.")
    assert failure_in(words, touched_device=True).kind == RAISES
    assert failure_in(words, touched_device=False) is None
    abort = RuntimeError(DirectMLFailure(Failure(ABORTS, "eye crashes", "SIGSEGV")).args[0])
    assert failure_in(abort, touched_device=False).kind == ABORTS  # a factory's abort has no device inputs


def test_scatter_add_with_an_index_longer_than_self_along_dim_is_an_invalid_argument():
    self, longer = on_device(2, 4), on_device(2, 8, dtype=torch.int64)
    assert failure("aten::scatter_add.out", (self, 1, longer, on_device(2, 8)), {}, DEVICE).message.startswith("Unknown error")
    assert failure("aten::scatter_add.out", (self, 1, on_device(2, 4, dtype=torch.int64), on_device(2, 4)), {}, DEVICE) is None


def test_the_view_scatters_fail_on_directml_tensors_which_have_no_storage():
    found = failure("aten::slice_scatter", (on_device(4, 4), on_device(2, 4)), {}, DEVICE)
    assert found.kind == RAISES and "has_storage" in found.message
    assert failure("aten::slice_scatter", (torch.zeros(4, 4), torch.zeros(2, 4)), {}, DEVICE) is None


@pytest.mark.parametrize("name, args, refused", [
    ("aten::mm", (on_device(0, 3), on_device(3, 4)), True),
    ("aten::mm", (on_device(2, 3), on_device(3, 4)), False),
    ("aten::cat", ([on_device(2, 3), on_device(0, 3)],), True),
    ("aten::cat", ([on_device(3), on_device(0)],), False),  # torch itself skips an empty 1-D piece
    ("aten::cat", ([on_device(0, 3), on_device(0, 3)],), False),  # nothing but empty pieces runs
    ("aten::isnan", (on_device(4, dtype=torch.int64),), True),
    ("aten::isnan", (on_device(4),), False),
    ("aten::index_select", (on_device(), 0, on_device(1, dtype=torch.int64)), True),
    ("aten::index_select", (on_device(5), 0, on_device(0, dtype=torch.int64)), False),
], ids=["mm-empty", "mm", "cat-empty-2d", "cat-empty-1d", "cat-all-empty", "isnan-int", "isnan-float", "index_select-0d",
        "index_select-empty-index"])
def test_inputs_directml_refuses_as_an_invalid_argument(name, args, refused):
    found = failure(name, args, {}, DEVICE)
    assert (found is not None and found.kind == RAISES) is refused


def test_cdist_of_2d_inputs_fails_on_directml_and_batched_inputs_run():
    found = failure("aten::_cdist_forward", (on_device(6, 4), on_device(16, 4), 2.0, None), {}, DEVICE)
    assert found.message == "The size of tensor a (16) must match the size of tensor b (6) at non-singleton dimension 0"
    assert failure("aten::_cdist_forward", (on_device(2, 6, 4), on_device(2, 16, 4), 2.0, None), {}, DEVICE) is None
    # as many rows: runs, whatever p (measured on realdml)
    assert failure("aten::_cdist_forward", (on_device(3, 5), on_device(3, 5), 1.0, None), {}, DEVICE) is None


def test_an_error_a_rule_explains_is_read_as_directmls_whatever_its_words():
    from dmlprof.directml.failures import note, rule_for

    error = RuntimeError("The size of tensor a (16) must match the size of tensor b (6) at non-singleton dimension 0")
    assert failure_in(error) is None
    rule = rule_for(DEVICE, True, lambda func: func)  # the op name stands for the overload here
    found = rule("aten::_cdist_forward", (on_device(6, 4), on_device(16, 4), 2.0, None), {})
    note(error, found)
    assert failure_in(error, touched_device=False).kind == RAISES


def test_an_out_tensor_on_the_device_puts_the_call_there():
    out = on_device(3, 3)
    assert failure("aten::eye.m_out", (3, 3), {"out": out}, DEVICE).kind == ABORTS


@pytest.mark.parametrize("pad, refused", [((0, 0, -1, 0), True), ((-1, -2, -1, -1), True), ((1, 1, -1, 0), True),
                                          ((0, 0, 0, -1), False), ((-1, -1), False), ((1, 2, 1, 1), False)])
def test_padding_directml_refuses(pad, refused):
    found = failure("aten::constant_pad_nd", (on_device(2, 3, 6, 5), list(pad)), {}, DEVICE)
    assert (found is not None) is refused


def test_convolution_and_pooling_directml_refuses():
    conv3d = (on_device(1, 2, 4, 4, 4), on_device(3, 2, 2, 2, 2), None, [1, 1, 1], [0, 0, 0], [1, 1, 1], False,
              [0, 0, 0], 1)
    assert failure("aten::convolution_overrideable", conv3d, {}, DEVICE).message == "input must be 4-dimensional"
    conv2d = (on_device(1, 2, 4, 4), on_device(3, 2, 2, 2), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert failure("aten::convolution_overrideable", conv2d, {}, DEVICE) is None
    pool = (on_device(1, 2, 4, 4), [2, 2], [2, 2], [0, 0], False, True)
    assert failure("aten::avg_pool2d", pool + (3,), {}, DEVICE).message.startswith("Divisor override")
    assert failure("aten::avg_pool2d", pool, {}, DEVICE) is None
    int_pool = (on_device(1, 2, 4, 4, dtype=torch.int64),) + pool[1:]
    assert failure("aten::avg_pool2d", int_pool, {}, DEVICE).message.startswith("Unknown error")


def test_float64_is_refused_where_directml_computes_on_it_not_where_it_is_made():
    from dmlprof.directml.float64 import refuses_float64

    f64, f32 = torch.empty(3, dtype=torch.float64, device=DEVICE), torch.empty(3, device=DEVICE)
    host64 = torch.empty(3, dtype=torch.float64)
    # made, viewed, indexed by a tensor and moved between host and device: runs (measured on realdml)
    for op, values, outputs in [("aten::empty.memory_format", (f64,), True), ("aten::view", (f64, [3]), False),
                                ("aten::index.Tensor", (f64, [None]), False), ("aten::copy_", (f64, host64), False),
                                ("aten::_copy_from", (f64, host64), False), ("aten::copy_", (f64, host64), True),
                                ("aten::copy_", (f64, torch.empty(3, dtype=torch.bool, device=DEVICE)), False)]:
        assert not refuses_float64(op, values, DEVICE, outputs), op
    # computed on: fills, copies and casts on the device, arithmetic, a factory's float64 output
    for op, values, outputs in [("aten::zero_", (f64,), False), ("aten::clone", (f64,), False),
                                ("aten::copy_", (f64, f32), False), ("aten::copy_", (f32, f64), False),
                                ("aten::cat", ([f64, f64],), False), ("aten::add.Tensor", (f64, f64), False),
                                ("aten::full", (f64,), True)]:
        assert refuses_float64(op, values, DEVICE, outputs), op
    # nothing float64 on the device: nothing to refuse
    assert not refuses_float64("aten::add.Tensor", (f32, f32), DEVICE)
    assert not refuses_float64("aten::add.Tensor", (host64, host64), DEVICE)


def test_as_strided_past_the_device_tensors_allocation_raises_in_torch_directmls_words():
    x = torch.empty(10, dtype=torch.int64, device=DEVICE)
    found = failure("aten::as_strided", (x, [2, 2], [1, 2], 10), {}, DEVICE)
    assert found is not None and found.message.startswith(
        "ensure_in_bounds: sizes [2, 2], strides [1, 2], storage offset 10, and itemsize 8 requiring a storage size "
        "of 112 are out of bounds for storage of size 80")
    assert failure("aten::as_strided", (x, [2, 2], [1, 2], 4), {}, DEVICE) is None
    assert failure("aten::as_strided", (x, [0, 2], [1, 2], 40), {}, DEVICE) is None  # empty: nothing read


def test_combinations_cdist_backward_and_one_channel_batch_norm_backward_raise_as_measured():
    said = failure("aten::combinations", (on_device(3), 2), {}, DEVICE)
    assert said.message == "The size of tensor a (3) must match the size of tensor b (0) at non-singleton dimension 1"
    assert "CreateOperator" in failure("aten::combinations", (on_device(1), 1), {}, DEVICE).message
    assert failure("aten::combinations", (on_device(3), 0), {}, DEVICE) is None  # r = 0: no device op
    x1 = on_device(2, 3, 5)
    said = failure("aten::_cdist_backward", (on_device(2, 3, 3), x1, x1, 1.0, on_device(2, 3, 3)), {}, DEVICE)
    assert "got [2, 3, 1, 5] but expected shape compatible with [2, 3, 5]" in said.message

    def batch_norm_backward(channels, weight_grad=True):
        per_channel = [on_device(channels) for _ in range(5)]
        return (on_device(4, channels), on_device(4, channels), *per_channel, True, 1e-5, [True, weight_grad, False])

    assert failure("aten::native_batch_norm_backward", batch_norm_backward(1), {}, DEVICE).kind == RAISES
    assert failure("aten::native_batch_norm_backward", batch_norm_backward(3), {}, DEVICE) is None
    assert failure("aten::native_batch_norm_backward", batch_norm_backward(1, weight_grad=False), {}, DEVICE) is None


def test_kthvalue_crashes_for_2d_inputs_and_float16_and_a_1d_float32_or_int64_input_runs():
    assert failure("aten::kthvalue", (on_device(5, 5), 2, 1, False), {}, DEVICE).kind == ABORTS
    assert failure("aten::kthvalue", (on_device(5, dtype=torch.float16), 2, 0, False), {}, DEVICE).kind == ABORTS
    assert failure("aten::kthvalue", (on_device(5, dtype=torch.int64), 2, 0, True), {}, DEVICE) is None
    assert failure("aten::kthvalue", (on_device(5), 2, 0, False), {}, DEVICE) is None
