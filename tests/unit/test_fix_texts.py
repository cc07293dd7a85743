"""Fix texts that name what the user wrote, and hotspots only a newer torch reaches kept in their place.

Synthetic sessions (no model runs): each hotspot as the recorder would have
seen it, the report built from it, and the fix or flag a user would read.
"""
from __future__ import annotations

from dmlprof.backends.errors import match_known_error
from dmlprof.render.terminal import render_text
from dmlprof.report import build_report
from dmlprof.report.gate import check_limits
from session_factory import make_session


def _fixes(session) -> dict:
    """op of each hotspot (and its phases) -> the advice of its first fix."""
    return {(h.op, h.phases): (h.fixes[0].advice if h.fixes else None) for h in build_report(session).hotspots}


def test_index_add_called_by_the_user_gets_advice_about_index_add_not_index_select():
    session = make_session([
        {"op": "aten::index_add_", "verdict": "fallback", "time_ns": 10, "fallback_ops": "aten::index_add.out=1",
         "fallback_calls": 1},
        {"op": "aten::index_select_backward", "verdict": "fallback", "phase": "backward", "time_ns": 10,
         "fallback_ops": "aten::index_add.out=1", "fallback_calls": 1},
    ])
    fixes = _fixes(session)
    called = fixes[("aten::index_add_", ("forward",))]
    assert "index_add_" in called and "index_put_" in called and "index_select" not in called
    assert "index_select" in fixes[("aten::index_select_backward", ("backward",))]


def test_an_ema_lerp_is_a_hotspot_apart_from_adamws_with_its_own_fix():
    """AveragedModel's ``_foreach_lerp_`` runs outside the optimizer step: folded into AdamW's row, the
    AdamW fix would leave its calls; apart, each row's fix is the one that removes its calls."""
    lerp = {"op": "aten::_foreach_lerp_.Scalar", "verdict": "fallback", "time_ns": 10,
            "fallback_ops": "aten::lerp.Scalar_out=9", "fallback_calls": 9}
    session = make_session([dict(lerp, phase="optimizer", module="optimizer.AdamW"),
                            dict(lerp, phase="other", module="", source="train.py:40", fallback_ops="aten::lerp.Scalar_out=6",
                                 fallback_calls=6)])
    hotspots = {h.phases: h for h in build_report(session).hotspots}
    assert set(hotspots) == {("optimizer",), ("other",)}
    assert hotspots[("optimizer",)].inner_calls == 9 and hotspots[("other",)].inner_calls == 6
    assert "dmlprof.patch(model, optimizer)" in hotspots[("optimizer",)].fixes[0].advice
    ema = hotspots[("other",)].fixes[0].advice
    assert "AveragedModel" in ema and "avg_fn" in ema and "dmlprof.patch(" not in ema


def test_view_as_real_in_the_optimizer_step_is_advice_about_complex_parameters():
    session = make_session([
        {"op": "aten::view_as_real", "verdict": "fallback", "phase": "optimizer", "time_ns": 10,
         "module": "optimizer.Adam"},
        {"op": "aten::view_as_real", "verdict": "fallback", "phase": "forward", "time_ns": 10},
    ])
    fixes = _fixes(session)
    assert "complex parameters" in fixes[("aten::view_as_real", ("optimizer",))]
    assert "fft" in fixes[("aten::view_as_real", ("forward",))]


def test_scatter_reduce_has_a_fix():
    session = make_session([{"op": "aten::scatter_reduce.two", "verdict": "fallback", "time_ns": 10,
                             "fallback_ops": "aten::scatter_reduce.two_out=1", "fallback_calls": 1}])
    advice = next(iter(_fixes(session).values()))
    assert advice and "scatter_reduce" in advice and "scatter_add_" in advice


def test_a_sparse_gradient_on_directml_is_one_line_with_what_to_do():
    message = ("NotImplementedError: Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with arguments "
               "from the 'SparsePrivateUse1' backend. This could be because the operator doesn't exist")
    known = match_known_error(message)
    assert known is not None and known.key == "privateuse1_sparse"
    assert "sparse=False" in known.one_line() and "nn.Embedding" in known.one_line()


def _torch_213_prediction():
    return make_session([
        {"op": "aten::_safe_softmax", "verdict": "fallback", "time_ns": 0, "fallback_ops": "aten::isneginf.out=1",
         "fallback_calls": 1, "module": "Net.attn"},
        {"op": "aten::_foreach_lerp_.Scalar", "verdict": "fallback", "phase": "optimizer", "time_ns": 0,
         "fallback_ops": "aten::lerp.Scalar_out=4", "fallback_calls": 4, "module": "optimizer.AdamW"},
        {"op": "aten::addmm", "time_ns": 0},
    ], meta={"mode": "predicted", "torch_version": "2.13.0+cpu", "target": "dml"})


def test_a_hotspot_only_a_newer_torch_reaches_carries_its_flag_and_comes_last():
    """GIVEN a prediction on torch 2.13 whose attention reaches isneginf.out (torch 2.4.1's does not)
    THEN that hotspot carries the flag in its own row and the users' own finding leads."""
    report = build_report(_torch_213_prediction())
    first, last = report.hotspots
    assert first.op == "aten::_foreach_lerp_.Scalar" and first.torch_flag is None
    assert last.op == "aten::_safe_softmax" and "2.4.1" in last.torch_flag
    text = render_text(report, width=200)
    assert "aten::_safe_softmax -> aten::isneginf.out [not on torch 2.4.1]" in text
    hotspots = text[text.index("Fallback hotspots"):]  # (the run's Torch note above names the op too)
    assert hotspots.index("aten::_foreach_lerp_.Scalar") < hotspots.index("aten::_safe_softmax")


def test_check_leaves_out_what_only_a_newer_torch_reaches_unless_asked():
    report = build_report(_torch_213_prediction())
    assert check_limits(report, None, 1).passed  # lerp only: one op
    assert [h.op for h in check_limits(report, None, 1).hotspots] == ["aten::_foreach_lerp_.Scalar"]
    counted = check_limits(report, 0.3, 1, count_torch_only=True)
    assert not counted.passed and {c.name for c in counted.failed} == {"fallback share of calls", "ops that fell back"}
    assert check_limits(report, 0.5, None).checks[-1].measured == 1 / 3  # the lerp call of three


def test_adams_lerp_fix_is_short_and_names_the_patch():
    """Every Adam user reads it, in the report and once per hotspot in CI annotations: a sentence, not a page."""
    from dmlprof.replacements.catalog import advice_for

    advice = advice_for("aten::lerp.Scalar_out", called="aten::_foreach_lerp_.Scalar", phases=("optimizer",))
    assert len(advice) <= 200 and "dmlprof.patch(model, optimizer)" in advice and "state kept" in advice
