"""The timeline analysis: every timed call on one axis, in lanes by where it ran, and the steps that hold them."""
from __future__ import annotations

from dmlprof.analysis.timeline import LANES, step_spans, timeline
from dmlprof.report import build_report
from session_factory import make_session
from session_kinds import KINDS


def _two_steps():
    return make_session([
        {"op": "aten::addmm", "time_ns": 1_000, "start_ns": 5_000, "step": 0},
        {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 4_000, "start_ns": 6_500, "step": 0},
        {"op": "aten::nonzero", "verdict": "cpu", "time_ns": 500, "start_ns": 11_000, "step": 0},
        {"op": "aten::relu", "time_ns": 2_000, "start_ns": 20_000, "step": 1},
    ])


def test_calls_start_at_zero_in_time_order_and_lie_in_the_lane_of_their_verdict():
    calls = timeline(_two_steps().ops)
    assert calls["start_ns"].tolist() == [0, 1_500, 6_000, 15_000]
    assert calls["time_ns"].tolist() == [1_000, 4_000, 500, 2_000]
    assert [LANES[i] for i in calls["lane"]] == ["device", "fallback", "host", "device"]
    assert calls["op"].tolist() == ["aten::addmm", "aten::cumsum", "aten::nonzero", "aten::relu"]


def test_each_step_spans_from_its_first_call_to_the_end_of_its_last():
    spans = step_spans(timeline(_two_steps().ops))
    assert spans.to_dict("records") == [{"step": 0, "start_ns": 0, "end_ns": 6_500, "calls": 3},
                                        {"step": 1, "start_ns": 15_000, "end_ns": 17_000, "calls": 1}]


def test_untimed_sessions_have_no_timeline():
    assert timeline(KINDS["predicted"]().ops).empty
    assert build_report(KINDS["predicted"]()).timeline is None
    assert build_report(KINDS["sweep"]()).timeline is None
    assert build_report(KINDS["empty"]()).timeline is None


def test_the_report_carries_the_timeline_of_a_timed_scan():
    session = KINDS["live_dml"]()
    line = build_report(session).timeline
    assert line.calls == len(session.ops) and line.lanes == LANES
    assert line.end_ns == max(s + t for s, t in zip(line.start_ns, line.time_ns)) > 0
    assert sum(span.calls for span in line.steps) == len(session.ops)


def test_module_rows_carry_the_class_the_recorder_kept():
    rows = {row.module: row.class_name for row in build_report(KINDS["live_dml"]()).modules}
    assert rows["Net.features.1"] == "GroupNorm" and rows["Net"] == "Net"
    assert rows["optimizer.AdamW"] is None  # not a module: no class recorded
