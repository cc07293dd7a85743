"""The recorder's dispatcher tap sees every call below autograd and changes none of ATen's paths.

GIVEN programs whose ATen path depends on ``isTensorSubclassLike`` (which any
dispatch mode makes true): ctc_loss with CPU lengths, prod's backward,
attention with a mask
WHEN  they run with and without dmlprof recording
THEN  the op sequence torch.profiler sees is the same, and dmlprof's rows name
      the unrecorded program's ops.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import dmlprof
from dmlprof.record.tap import DispatcherTap, TapUnavailable

pytestmark = pytest.mark.live  # torch-version-sensitive: the tap differs on torch 2.4


def _profiled_ops(fn) -> list:
    """Top-level aten ops torch.profiler sees while ``fn`` runs (dmlprof's own excluded)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    return sorted(e.name for e in events)


def _ctc():
    torch.manual_seed(0)
    logits = torch.randn(12, 3, 5).log_softmax(2).requires_grad_()
    targets = torch.randint(1, 5, (3, 4))
    lengths_in = torch.full((3,), 12, dtype=torch.long)  # on the CPU, as the docs say
    lengths_out = torch.tensor([4, 3, 2])
    loss = F.ctc_loss(logits, targets, lengths_in, lengths_out)
    loss.backward()
    return loss.detach(), logits.grad


def _prod():
    x = torch.tensor([1.5, 2.0, 3.0], requires_grad=True)
    x.prod().backward()
    return x.grad


def _masked_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 4, 8) for _ in range(3))
    mask = torch.zeros(4, 4)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("program", [_ctc, _prod, _masked_attention], ids=["ctc_cpu_lengths", "prod_backward",
                                                                           "masked_attention"])
def test_recording_takes_the_unrecorded_paths(program):
    plain_result = program()
    plain_ops = _profiled_ops(program)
    with dmlprof.profile("cpu", profiler=False) as run:
        recorded_result = program()
    recorded_ops = _profiled_ops(lambda: _recorded(program))
    for plain, recorded in zip(_flat(plain_result), _flat(recorded_result)):
        assert torch.equal(plain, recorded)
    # Under the tap every recorded call shows twice in the profiler (the call, then the tap running it):
    # the set of op names is the unrecorded program's.
    assert set(recorded_ops) == set(plain_ops)
    ours = set(run.session.ops["op"])
    assert "aten::_ctc_loss.Tensor" not in ours and "aten::cumprod" not in ours
    if program is _ctc:
        assert "aten::_ctc_loss" in ours and "aten::_ctc_loss_backward" in ours


def _recorded(program):
    with dmlprof.profile("cpu", profiler=False):
        program()


def _flat(value):
    return value if isinstance(value, tuple) else (value,)


def test_backward_calls_are_seen_with_their_phase():
    model = torch.nn.Linear(4, 2)
    with dmlprof.profile("cpu", profiler=False) as run:
        model(torch.randn(3, 4)).sum().backward()
    phases = dict(zip(run.session.ops["op"], run.session.ops["phase"]))
    assert phases["aten::addmm"] == "forward"
    assert phases["aten::mm"] == "backward"


def test_parameters_and_subclass_views_still_build_while_recording():
    # nn.Parameter(t) and as_subclass need the alias they make to have no Python object yet.
    class Tagged(torch.Tensor):
        pass

    with dmlprof.profile("cpu", profiler=False):
        param = torch.nn.Parameter(torch.randn(3))
        tagged = torch.randn(2).as_subclass(Tagged)
    assert isinstance(param, torch.nn.Parameter) and type(tagged) is Tagged


def test_one_recording_at_a_time():
    first = DispatcherTap(lambda op, args, kwargs: op(*args, **kwargs)).install()
    try:
        with pytest.raises(TapUnavailable):
            DispatcherTap(lambda op, args, kwargs: op(*args, **kwargs)).install()
    finally:
        first.remove()
    DispatcherTap(lambda op, args, kwargs: op(*args, **kwargs)).install().remove()  # free again


def _noting_tap(seen: list) -> DispatcherTap:
    """A tap that notes each op it is handed in ``seen`` and runs it below itself."""
    def handler(op, args, kwargs):
        seen.append(str(op))
        return tap.call(op, args, kwargs)

    tap = DispatcherTap(handler)
    return tap


def test_a_removed_tap_sees_nothing_and_the_next_one_sees_every_call():
    # the kernels stay registered once a process (registering ~3,000 of them took 50-70 ms a recording); what a
    # removed tap's kernels do must be what no tap does, and a second tap must get every call, not the first's
    first_seen, second_seen = [], []
    first, second = _noting_tap(first_seen), _noting_tap(second_seen)
    first.install()
    with first.enabled():
        torch.ones(3).add(1)
    first.remove()
    calls_while_first = len(first_seen)
    with first.enabled():  # the key included with no tap installed: the calls run below it, unseen
        out = torch.ones(3).mul(2)
    assert torch.equal(out, torch.full((3,), 2.0)) and len(first_seen) == calls_while_first > 0
    second.install()
    try:
        with second.enabled():
            torch.ones(3).sub(1)
    finally:
        second.remove()
    assert any("sub" in name for name in second_seen) and len(first_seen) == calls_while_first


def test_ops_defined_after_the_tap_is_installed_are_seen():
    seen = []
    tap = _noting_tap(seen).install()
    try:
        library = torch.library.Library("dmlprof_tap_test", "DEF")
        library.define("twice(Tensor x) -> Tensor")
        library.impl("twice", lambda x: x * 2, "CPU")
        tap.refresh()  # the recorder calls this at each model call and optimizer step
        with tap.enabled():
            out = torch.ops.dmlprof_tap_test.twice(torch.ones(2))
        assert torch.equal(out, torch.full((2,), 2.0))
        assert any("twice" in name for name in seen)
    finally:
        tap.remove()


def test_a_compiled_model_trains_while_recorded_and_its_tracing_is_not_recorded():
    # re-probe 5's open High, its cause found by re-probe 10: on torch >= 2.5 the tap's Python fallback asserted
    # (func != nullptr, python_dispatch.cpp) at Dynamo's first fake tensor: a torch.compile'd model failed in every scan
    from torch._subclasses.fake_tensor import FakeTensor

    seen, traced = [], []

    def handler(op, args, kwargs):
        seen.append(str(op))
        traced.extend(a for a in args if isinstance(a, FakeTensor))
        return tap.call(op, args, kwargs)

    torch._dynamo.reset()
    model = torch.nn.Linear(4, 2)
    compiled = torch.compile(model, backend="eager")
    tap = DispatcherTap(handler).install()
    try:
        with tap.enabled():
            compiled(torch.randn(3, 4)).pow(2).mean().backward()
    finally:
        tap.remove()
        torch._dynamo.reset()
    assert model.weight.grad is not None
    assert any("addmm" in name or "mm" in name for name in seen)  # the compiled forward's real calls
    assert traced == []  # Dynamo's tracing on fake tensors computes nothing: not recorded


def test_a_submodule_whose_forward_raises_and_is_caught_is_left_behind():
    """GIVEN a parent that calls a submodule inside try/except, and the submodule raises
    THEN the calls after it are the parent's, not charged to the submodule that raised."""
    import torch
    from torch import nn

    import dmlprof

    class Raises(nn.Module):
        def forward(self, x):
            raise ValueError("no")

    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.child = Raises()

        def forward(self, x):
            try:
                self.child(x)
            except ValueError:
                pass
            return x * 2

    model, x = Parent(), torch.ones(2)
    with dmlprof.profile("cpu", profiler=False) as run:
        model(x)
    assert run.session.ops[["op", "module"]].values.tolist() == [["aten::mul.Tensor", "Parent"]]


def test_calls_that_make_meta_tensors_pass_unrecorded_as_calls_on_meta_tensors_do():
    # re-probe 11, case 29: a shape probe under torch.device("meta") (or to("meta")) computes nothing on any device,
    # as a call on meta tensors does (unrecorded), but its factory calls were recorded as calls "on CPU tensors"
    seen = []
    tap = _noting_tap(seen).install()
    try:
        with tap.enabled():
            with torch.device("meta"):
                probe = torch.nn.Linear(4, 3)
                shape = probe(torch.empty(2, 4)).shape
            moved = torch.ones(2).to("meta")
            made = torch.zeros(2, device="meta")
            on_cpu = torch.zeros(2)
    finally:
        tap.remove()
    assert shape == (2, 3) and moved.is_meta and made.is_meta and not on_cpu.is_meta
    assert [name for name in seen if "ones" not in name] == ["aten.zeros.default"], seen  # the CPU's zeros alone
