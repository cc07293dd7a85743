"""--verify's pieces on the CPU: tolerances, the per-call comparison, lost updates, the report data."""
from __future__ import annotations

import math

import pytest
import torch

from dmlprof.analysis.verification import summary, verdict_line
from dmlprof.verify import Verifier, compare, tolerance_for
from dmlprof.verify.tolerance import reduction_scale

# Schemas, tags and kernels differ across torch versions: also run on torch 2.4.1.
pytestmark = pytest.mark.live


class CpuBackend:
    """The verifier only needs to know which device type counts as the device."""

    device_type = "cpu"
    name = "cpu"


# -- tolerances ------------------------------------------------------------------
def test_tolerances_loosen_with_precision_and_integers_are_exact():
    assert tolerance_for(torch.float32) == (1e-4, 1e-5)
    assert tolerance_for(torch.float16)[0] > tolerance_for(torch.float32)[0] > tolerance_for(torch.float64)[0]
    assert tolerance_for(torch.bfloat16)[0] > tolerance_for(torch.float16)[0]
    assert tolerance_for(torch.complex64) == tolerance_for(torch.float32)
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool):
        assert tolerance_for(dtype) is None


def test_equal_and_within_tolerance_pass():
    x = torch.linspace(-3, 3, 100)
    assert compare(x.clone(), x) is None
    assert compare(x * (1 + 5e-5), x) is None  # inside rtol 1e-4


def test_beyond_tolerance_reports_errors():
    x = torch.linspace(1, 2, 10)
    bad = x.clone()
    bad[3] += 0.5
    found = compare(bad, x)
    assert found["mismatched"] == 1 and found["numel"] == 10
    assert found["max_abs_error"] == pytest.approx(0.5)
    assert found["max_rel_error"] == pytest.approx(0.5 / float(x[3]))


def test_half_precision_is_looser_than_float32():
    x = torch.linspace(1, 2, 10)
    off = x * (1 + 3e-3)
    assert compare(off, x) is not None
    assert compare(off.half(), x.half()) is None


def test_integers_must_match_exactly():
    a = torch.arange(10)
    b = a.clone()
    b[0] += 1
    assert compare(a.clone(), a) is None
    found = compare(b, a)
    assert found["mismatched"] == 1 and found["max_abs_error"] == 1
    flags = torch.tensor([True, False])
    assert compare(~flags, flags)["mismatched"] == 2


def test_nan_matches_nan_and_infinities_must_match():
    x = torch.tensor([1.0, math.nan, math.inf])
    assert compare(x.clone(), x) is None
    assert compare(torch.tensor([1.0, 2.0, math.inf]), x) is not None  # NaN lost
    assert compare(torch.tensor([1.0, math.nan, -math.inf]), x) is not None
    assert compare(torch.tensor([1.0, math.nan, 1e30]), x) is not None


def test_shape_or_dtype_mismatch_diverges():
    assert "shape" in compare(torch.zeros(3), torch.zeros(4))["reason"]
    assert "dtype" in compare(torch.zeros(3, dtype=torch.float64), torch.zeros(3))["reason"]


def test_reductions_get_room_for_reordered_sums():
    assert reduction_scale(100, 100) == 1.0
    assert reduction_scale(10_000, 1) == pytest.approx(100.0)
    big = torch.full((1,), 1e4)
    # Off by 5 in 1e4: a reordered sum of 10,000 terms may be; an elementwise op may not.
    assert compare(big + 5, big) is not None
    assert compare(big + 5, big, scale=reduction_scale(10_000, 1)) is None
    assert compare(big + 500, big, scale=reduction_scale(10_000, 1)) is not None
    # An output element that cancelled to ~0 is judged against the output's largest magnitude.
    out = torch.tensor([1e3, 1e-3])
    near = torch.tensor([1e3, 1e-3 + 5e-2])
    assert compare(near, out) is not None
    assert compare(near, out, scale=reduction_scale(64, 1)) is None


# -- the per-call check ------------------------------------------------------------
def run_checked(verifier, func, args, kwargs=None, tamper=None):
    """What the recorder does around one call; ``tamper`` plays a faulty device."""
    kwargs = kwargs or {}
    pending = verifier.before(func, args, kwargs)
    out = func(*args, **kwargs)
    if tamper is not None:
        tamper(out, args)
    if pending is not None:
        verifier.after(pending, args, kwargs, out, step=0, phase="forward", module="Net.fc", source="model.py:3", seq=7)
    return out


def test_correct_calls_pass_and_wrong_results_are_named():
    verifier = Verifier(CpuBackend())
    a, b, c = torch.randn(4, 3), torch.randn(3, 5), torch.randn(5)
    run_checked(verifier, torch.ops.aten.addmm.default, (c, a, b))
    assert verifier.checked_calls == 1 and verifier.divergent == []

    def corrupt(out, args):
        out.add_(1.0)

    run_checked(verifier, torch.ops.aten.addmm.default, (c, a, b), tamper=corrupt)
    record = verifier.result()["divergent"][0]
    assert record["op"] == "aten::addmm" and record["what"] == "output"
    assert record["max_abs_error"] == pytest.approx(1.0, rel=1e-4)
    assert record["module"] == "Net.fc" and record["source"] == "model.py:3" and record["seq"] == 7
    assert record["input_shapes"] == [[5], [4, 3], [3, 5]] and record["output_shape"] == [4, 5]


def test_an_output_undefined_for_the_call_is_not_compared_and_the_rest_is():
    verifier = Verifier(CpuBackend())
    scores, targets = torch.randn(4, 3).log_softmax(1), torch.tensor([0, 2, 1, 2])

    def weight_sum(out, args):  # a total_weight unlike the CPU's (DirectML's is the weight sum, the CPU's 0.0)
        out[1].fill_(7.0)

    run_checked(verifier, torch.ops.aten.nll_loss_forward.default, (scores, targets, None, 0, -100), tamper=weight_sum)
    assert verifier.divergent == [] and verifier.checked_calls == 1
    run_checked(verifier, torch.ops.aten.nll_loss_forward.default, (scores, targets, None, 1, -100), tamper=weight_sum)
    assert [d["what"] for d in verifier.divergent] == ["output 1"]  # reduction="mean": total_weight is read

    def wrong_loss(out, args):
        out[0].add_(1.0)

    run_checked(verifier, torch.ops.aten.nll_loss_forward.default, (scores, targets, None, 0, -100), tamper=wrong_loss)
    assert [d["what"] for d in verifier.divergent][-1] == "output 0"


def test_inplace_write_that_did_not_land_is_caught():
    verifier = Verifier(CpuBackend())
    x, y = torch.ones(3), torch.ones(3)
    saved = x.clone()

    def drop(out, args):
        args[0].copy_(saved)

    run_checked(verifier, torch.ops.aten.add_.Tensor, (x, y), tamper=drop)
    record = verifier.result()["divergent"][0]
    assert record["op"] == "aten::add_.Tensor" and record["what"].startswith("in-place write to self")
    # The inputs were copied before the call: the CPU saw ones, not the device's result.
    assert record["max_abs_error"] == pytest.approx(1.0)


def test_out_variant_write_is_checked():
    verifier = Verifier(CpuBackend())
    a, b, out = torch.randn(3), torch.randn(3), torch.empty(3)
    run_checked(verifier, torch.ops.aten.mul.out, (a, b), {"out": out})
    assert verifier.divergent == [] and verifier.checked_calls == 1
    run_checked(verifier, torch.ops.aten.mul.out, (a, b), {"out": out}, tamper=lambda o, args: o.zero_())
    assert verifier.result()["divergent"][0]["what"] == "write to out="


def test_random_view_and_uninitialised_calls_are_skipped_and_said():
    verifier = Verifier(CpuBackend())
    x = torch.randn(4, 4)
    run_checked(verifier, torch.ops.aten.bernoulli.default, (torch.full((4,), 0.5),))
    run_checked(verifier, torch.ops.aten.native_dropout.default, (x, 0.5, True))
    run_checked(verifier, torch.ops.aten.t.default, (x,))
    run_checked(verifier, torch.ops.aten.empty_like.default, (x,))
    result = verifier.result()
    assert result["checked_calls"] == 0 and result["divergent"] == []
    assert set(result["skipped"]) == {"random", "view", "uninitialised"}
    assert result["skipped"]["random"]["ops"] == {"aten::bernoulli": 1, "aten::native_dropout": 1}


def test_calls_without_device_tensors_are_not_checked():
    class Accelerator(CpuBackend):
        device_type = "privateuseone"

    verifier = Verifier(Accelerator())
    run_checked(verifier, torch.ops.aten.add.Tensor, (torch.ones(2), torch.ones(2)))
    assert verifier.checked_calls == 0 and not verifier.skipped


def test_tie_indices_are_not_compared_but_values_are():
    verifier = Verifier(CpuBackend())
    x = torch.tensor([[1.0, 1.0, 0.0]])

    def other_tie(out, args):
        out[1].fill_(1)  # the other maximum's index: as valid as 0

    run_checked(verifier, torch.ops.aten.max.dim, (x, 1), tamper=other_tie)
    assert verifier.divergent == []
    run_checked(verifier, torch.ops.aten.max.dim, (x, 1), tamper=lambda out, args: out[0].fill_(5))
    assert verifier.result()["divergent"][0]["what"].startswith("output 0")


# -- lost updates -----------------------------------------------------------------
class ForgetfulSGD(torch.optim.SGD):
    """An optimizer whose update never lands on some parameters (a lost write)."""

    def __init__(self, params, lr, forget):
        super().__init__(params, lr=lr)
        self.forget = forget

    @torch.no_grad()
    def step(self, closure=None):
        kept = [p.clone() for p in self.forget]
        super().step()
        for p, old in zip(self.forget, kept):
            p.copy_(old)


def train_one_step(optimizer_factory):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    verifier = Verifier(CpuBackend())
    verifier.name_parameters(model)
    verifier.attach(None)
    try:
        optimizer = optimizer_factory(model)
        model(torch.randn(5, 4)).sum().backward()
        optimizer.step()
    finally:
        verifier.detach()
    return verifier.result()


def test_parameters_the_optimizer_did_not_update_are_named():
    result = train_one_step(lambda m: ForgetfulSGD(m.parameters(), lr=0.1, forget=[m[1].weight]))
    assert [r["parameter"] for r in result["lost_updates"]] == ["Sequential.1.weight"]
    assert result["lost_updates"][0]["optimizer"] == "ForgetfulSGD"
    assert result["optimizer_steps"] == 1 and result["parameters_checked"] == 4


def test_a_step_calling_super_step_counts_once():
    torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)  # SGD.step itself hooked too
    result = train_one_step(lambda m: ForgetfulSGD(m.parameters(), lr=0.1, forget=[]))
    assert result["optimizer_steps"] == 1 and result["lost_updates"] == []


def test_a_correct_step_and_lr_zero_raise_no_alarm():
    assert train_one_step(lambda m: torch.optim.Adam(m.parameters(), lr=1e-3))["lost_updates"] == []
    zero = train_one_step(lambda m: torch.optim.SGD(m.parameters(), lr=0.0))
    assert zero["lost_updates"] == [] and zero["parameters_not_expected_to_move"] == 4


# -- report data -----------------------------------------------------------------------
def test_clean_run_says_nothing_diverged():
    data = summary({"checked_calls": 120, "checked_ops": 14, "divergent_calls": 0, "divergent": [],
                    "lost_updates": [], "optimizer_steps": 2, "parameters_checked": 20, "skipped": {}})
    assert data["clean"]
    assert "nothing diverged" in data["headline"] and "120" in data["headline"]
    assert summary(None) is None


@pytest.mark.parametrize("backend, blind", [("emulated-dml", True), ("dml", False), ("cpu", False)])
def test_clean_run_on_the_emulated_device_says_it_cannot_see_directml_values(backend, blind):
    """The emulated device computes with the CPU's kernels: a clean --verify there says so, not a bare 'nothing
    diverged' (real DirectML, the same command, finds wrong values)."""
    data = summary({"checked_calls": 12, "checked_ops": 4, "divergent_calls": 0, "divergent": [], "backend": backend,
                    "lost_updates": [], "optimizer_steps": 1, "parameters_checked": 2, "skipped": {}})
    assert ("cannot see DirectML's wrong values" in data["headline"]) is blind
    assert data["headline"].startswith("Verification: nothing diverged - all 12 checked")
    assert "2 parameter updates over 1 optimizer step all landed" in data["headline"]  # singular for one


def test_divergent_calls_group_per_op_and_place():
    records = [
        {"op": "aten::addmm", "module": "Net.fc", "source": "m.py:3", "what": "output", "max_abs_error": e,
         "max_rel_error": e / 2, "reason": "values differ beyond tolerance", "step": s, "phase": "forward",
         "output_shape": [2, 2], "output_dtype": "float32", "input_shapes": [], "input_dtypes": []}
        for s, e in ((0, 1.0), (1, 3.0))
    ]
    data = summary({"checked_calls": 10, "divergent_calls": 2, "divergent": records,
                    "lost_updates": [{"parameter": "Net.fc.weight", "optimizer": "SGD", "max_abs_grad": 0.1}]})
    assert not data["clean"]
    assert len(data["divergent_ops"]) == 1
    row = data["divergent_ops"][0]
    assert row["calls"] == 2 and row["max_abs_error"] == 3.0 and row["first_step"] == 0
    assert data["lost_updates"][0]["parameter"] == "Net.fc.weight"
    line = verdict_line({"checked_calls": 10, "divergent_calls": 2, "lost_updates": [{"parameter": "x"}]})
    assert "2 of 10" in line and "lost updates" in line


# -- renderers ----------------------------------------------------------------------
def verified_session(divergent: bool):
    from dmlprof.session import Session

    verifier = Verifier(CpuBackend())
    a, b, c = torch.randn(4, 3), torch.randn(3, 5), torch.randn(5)
    tamper = (lambda out, args: out.add_(2.0)) if divergent else None
    run_checked(verifier, torch.ops.aten.addmm.default, (c, a, b), tamper=tamper)
    result = verifier.result()
    if divergent:
        result["lost_updates"] = [{"parameter": "Net.<b>fc</b>.weight", "optimizer": "SGD", "step": 0,
                                   "shape": [5, 3], "dtype": "float32", "max_abs_grad": 0.2, "lr": 0.1}]
    return Session(meta={"backend": "emulated-dml", "mode": "live", "model_name": "net"}, **{"verify": result})


def test_reports_show_divergent_ops_and_lost_updates():
    from dmlprof.render.html import render_html, report_data
    from dmlprof.report import build_report
    from dmlprof.render.terminal import render_text

    session = verified_session(divergent=True)
    text = render_text(session)
    assert "1 of 1 checked device op calls diverged" in text
    assert "aten::addmm" in text and "Net.fc" in text and "model.py:3" in text and "Net.<b>fc</b>.weight" in text
    document = build_report(session).to_dict()
    data = document["verification"]
    assert not data["clean"] and data["divergent_ops"][0]["op"] == "aten::addmm"
    assert "verify" not in document["extras"]  # the verification is said once, in its own section
    assert data["divergent_ops"][0]["max_abs_error"] == pytest.approx(2.0, rel=1e-4)
    html = render_html(session)
    assert 'id="verify"' in html and 'data-verify="divergent"' in html
    assert "Net.&lt;b&gt;fc&lt;/b&gt;.weight" in html and "Net.<b>fc" not in html  # escaped
    assert report_data(session)["verify"]["lost_updates"][0]["shape"] == "5x3"


def test_reports_say_plainly_when_nothing_diverged():
    from dmlprof.render.html import render_html
    from dmlprof.report import build_report
    from dmlprof.render.terminal import render_text

    session = verified_session(divergent=False)
    assert "Verification: nothing diverged" in render_text(session)
    assert build_report(session).to_dict()["verification"]["clean"] is True
    assert 'data-verify="clean"' in render_html(session)
    plain = verified_session(divergent=False)
    plain.verify = None
    assert "Verification" not in render_text(plain) and build_report(plain).to_dict()["verification"] is None


def test_calls_that_take_a_device_kernels_pooling_indices_are_never_recomputed_on_the_cpu():
    # torch-directml's max-pool indices are flat over the whole tensor: the CPU backward, which does not check
    # them, wrote out of bounds with them (the process died of SIGABRT under --verify --device dml)
    from dmlprof.verify.verifier import _Plan

    for op in (torch.ops.aten.max_pool2d_with_indices_backward.default, torch.ops.aten.max_unpool2d.default,
               torch.ops.aten.adaptive_max_pool2d_backward.default):
        assert _Plan(op).skip == "device_indices"
    assert _Plan(torch.ops.aten.max_pool2d_with_indices.default).skip is None  # the forward is still checked
