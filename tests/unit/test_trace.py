"""The TensorBoard / Chrome trace built from a Session (no model runs, no server)."""
from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from dmlprof.errors import UsageError
from dmlprof.render.trace import fallback_range_name, run_name, trace_dict, write_tensorboard_run
from session_factory import HOSTILE, fallback_mix, make_session

# what torch-tb-profiler 0.4.3 accepts as a trace file name (its consts.WORKER_PATTERN)
WORKER_PATTERN = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$")


def complete_events(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def assert_nested_per_thread(events):
    """Chrome-trace viewers (and the plugin's op tree) need ranges on one thread to nest, never cross.

    Checked with the consumers' own arithmetic: end = ts + dur in float microseconds,
    ordered by (start, -end) and then file order.
    """
    by_tid = defaultdict(list)
    for order, e in enumerate(events):
        by_tid[(e["pid"], e["tid"])].append((e["ts"], -(e["ts"] + e["dur"]), order, e))
    for items in by_tid.values():
        stack = []
        for ts, neg_end, _, e in sorted(items, key=lambda x: (x[0], x[1], x[2])):
            end = -neg_end
            while stack and ts >= stack[-1][1]:
                stack.pop()
            if stack:
                assert end <= stack[-1][1], f"{e['name']} crosses {stack[-1][0]}"
            stack.append((e["name"], end))


def test_trace_has_what_the_plugin_reads():
    trace = trace_dict(fallback_mix())
    assert trace["schemaVersion"] == 1 and trace["deviceProperties"] == []
    ops = [e for e in complete_events(trace) if e["cat"] == "cpu_op" and not e["name"].startswith("fallback::")]
    # one cpu_op per recorded call, with the op's own name, in microseconds
    assert len(ops) == 6
    addmm = [e for e in ops if e["name"] == "aten::addmm"]
    assert [e["dur"] for e in addmm] == [5.0, 5.0]
    assert addmm[0]["args"]["Input Dims"] == [[2, 3]] and addmm[0]["args"]["Input type"] == ["float32"]
    assert addmm[0]["args"]["Call stack"] == "model.py(10): Net.fc"
    steps = [e for e in complete_events(trace) if e["name"].startswith("ProfilerStep#")]
    assert [e["name"] for e in steps] == ["ProfilerStep#0"] and steps[0]["cat"] == "user_annotation"
    first, last = min(e["ts"] for e in ops), max(e["ts"] + e["dur"] for e in ops)
    assert steps[0]["ts"] <= first and steps[0]["ts"] + steps[0]["dur"] >= last


def test_fallback_calls_are_marked_ranges_around_the_op():
    trace = trace_dict(fallback_mix())
    events = complete_events(trace)
    marks = [e for e in events if e["name"].startswith("fallback::")]
    assert sorted(e["name"] for e in marks) == ["fallback::aten::cumsum", "fallback::aten::cumsum",
                                                "fallback::aten::lerp.Scalar_out"]
    for mark in marks:
        # the op call that fell back sits exactly inside its mark, on the same thread
        inside = [e for e in events if e["cat"] == "cpu_op" and e is not mark and e["tid"] == mark["tid"]
                  and e["ts"] == mark["ts"] and e["dur"] == mark["dur"]]
        assert len(inside) == 1 and inside[0]["args"]["dmlprof verdict"] == "fallback"
        # written first so that, on equal times, the plugin nests the op in the mark
        assert events.index(mark) < events.index(inside[0])
    assert not any(e["name"].startswith("fallback::") for e in events if e.get("args", {}).get("dmlprof verdict") == "device")


def test_no_fallback_marks_without_fallbacks():
    session = make_session([{"op": "aten::mm", "time_ns": 100}, {"op": "aten::relu", "time_ns": 50}])
    assert not [e for e in complete_events(trace_dict(session)) if e["name"].startswith("fallback::")]


def test_fallback_range_name_prefers_the_inner_ops():
    assert fallback_range_name("aten::_foreach_lerp_.Scalar", "aten::lerp.Scalar_out=4") == "fallback::aten::lerp.Scalar_out"
    assert fallback_range_name("aten::cumsum", "") == "fallback::aten::cumsum"
    assert fallback_range_name("aten::x", "aten::a=1;aten::b=3") == "fallback::aten::b+aten::a"


def test_ranges_nest_even_when_calls_touch_and_threads_differ():
    # calls that touch (no gap), overlap by a clock hiccup, and a second thread, over several steps
    calls = []
    clock = 1_000_000_000  # large start times: float microseconds lose precision first here
    for step in range(3):
        for i, phase in enumerate(["forward", "forward", "backward", "backward", "optimizer"]):
            calls.append({"op": "aten::mm" if i % 2 else "aten::cumsum", "verdict": "fallback" if i == 3 else "device",
                          "phase": phase, "step": step, "start_ns": clock, "time_ns": 1_001,
                          "thread": 1 if phase == "backward" and i == 3 else 0})
            clock += 1_001 if i != 1 else 995  # touching, then overlapping by 6 ns
    trace = trace_dict(make_session(calls))
    events = complete_events(trace)
    assert_nested_per_thread(events)
    assert [e["name"] for e in events if e["name"].startswith("ProfilerStep#")] == [f"ProfilerStep#{i}" for i in range(3)]
    assert {e["tid"] for e in events if e["cat"] == "cpu_op"} == {1, 2}
    phases = [e["name"] for e in events if e["name"].startswith("dmlprof::") and e["tid"] == 1]
    assert phases[:3] == ["dmlprof::forward", "dmlprof::backward", "dmlprof::optimizer"]


def test_trace_is_plain_json_and_escapes_nothing_it_should_not():
    session = make_session([{"op": HOSTILE, "verdict": "fallback", "time_ns": 10, "module": HOSTILE}])
    text = json.dumps(trace_dict(session))
    names = {e["name"] for e in json.loads(text)["traceEvents"]}
    # the trace is data for a viewer, so the name stays exactly what the model said
    assert HOSTILE in names and f"fallback::{HOSTILE}" in names


def test_write_tensorboard_run_layout(tmp_path):
    session = fallback_mix()
    session.meta = session.meta.updated(started_at="2026-11-30T02:55:42")
    path = write_tensorboard_run(session, tmp_path)
    assert path.parent.parent == tmp_path and path.parent.name == run_name(session) == "test-dml-20261130T025542"
    match = WORKER_PATTERN.match(path.name)
    assert match and match.group(1) == "dmlprof_dml" and match.group(2)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    assert json.loads(path.read_text(encoding="utf-8"))["traceEvents"]


def test_untimed_session_is_a_one_line_error(tmp_path):
    predicted = make_session([{"op": "aten::mm", "time_ns": 0}], meta={"mode": "predicted"})
    with pytest.raises(UsageError, match="no timed op calls"):
        write_tensorboard_run(predicted, tmp_path)


# -- the --trace file -------------------------------------------------------------------------------------
def _lanes(trace: dict) -> dict:
    """{(pid, tid): lane name} from the trace's metadata events."""
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def test_a_trace_file_has_a_kernel_lane_where_kernel_time_was_measured():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from session_kinds import KINDS
    from dmlprof.render.trace import KERNEL_LANE, KERNEL_PID, KERNEL_TID, trace_json

    # GIVEN a CUDA session whose two addmm calls have kernel times and whose relu has none
    session = KINDS["live_cuda"]()
    trace = json.loads(trace_json(session))
    assert _lanes(trace)[(KERNEL_PID, KERNEL_TID)] == KERNEL_LANE
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    calls = {e["args"]["External id"]: e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
    assert [k["name"] for k in kernels] == ["aten::addmm", "aten::addmm"]
    assert [k["dur"] for k in kernels] == [30.0, 25.0]  # us, as measured
    # the device was synchronised after each call: each kernel range ends with the call that launched it
    for kernel in kernels:
        call = calls[kernel["args"]["External id"]]
        assert kernel["ts"] + kernel["dur"] == pytest.approx(call["ts"] + call["dur"], abs=0.002)
    # a DirectML session has no kernel times: no kernel lane
    dml = json.loads(trace_json(KINDS["live_dml"]()))
    assert KERNEL_LANE not in _lanes(dml).values() and not [e for e in dml["traceEvents"] if e.get("cat") == "kernel"]


def test_without_a_sync_kernels_queue_one_after_another():
    from dmlprof.render.trace import trace_json

    session = make_session([{"op": "aten::mm", "time_ns": 1_000, "device_time_ns": 50_000},
                            {"op": "aten::relu", "time_ns": 1_000, "device_time_ns": 10_000}],
                           meta={"backend": "cuda", "sync": False})
    kernels = [e for e in json.loads(trace_json(session))["traceEvents"] if e.get("cat") == "kernel"]
    (mm, relu) = kernels
    assert mm["ts"] == 0.0 and mm["dur"] == 50.0
    assert relu["ts"] == pytest.approx(50.0) and relu["dur"] == 10.0  # launched at 1.1 us, ran when mm was done


def test_a_trace_file_puts_fallbacks_on_a_red_lane_of_their_own():
    from dmlprof.render.trace import FALLBACK_COLOUR, FALLBACK_LANE, FALLBACK_PID, FALLBACK_TID, trace_json

    trace = json.loads(trace_json(fallback_mix()))
    assert _lanes(trace)[(FALLBACK_PID, FALLBACK_TID)] == FALLBACK_LANE
    lane = [e for e in trace["traceEvents"] if e.get("pid") == FALLBACK_PID and e["ph"] == "X"]
    calls = {e["args"]["External id"]: e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"
             and e["args"].get("dmlprof verdict") == "fallback"}
    assert sorted(e["name"] for e in lane) == ["fallback::aten::cumsum", "fallback::aten::cumsum",
                                               "fallback::aten::lerp.Scalar_out"]
    for event in lane:  # one per call that fell back, at its call's time, red
        call = calls[event["args"]["External id"]]
        assert (event["ts"], event["dur"], event["cname"]) == (call["ts"], call["dur"], FALLBACK_COLOUR)
    marks = [e for e in trace["traceEvents"] if e["name"].startswith("fallback::") and e.get("pid") != FALLBACK_PID]
    assert marks and all(m["cname"] == FALLBACK_COLOUR for m in marks)
    plain = json.loads(trace_json(make_session([{"op": "aten::mm", "time_ns": 100}])))
    assert FALLBACK_LANE not in _lanes(plain).values()


def test_the_scanned_codes_ranges_span_their_calls_on_a_process_of_their_own():
    """Nested ranges that end with the same call must still nest (the outer ends later), a range entered
    twice is drawn twice, and a name is kept as written."""
    nested = '[["outer", 1], ["inner \\"x\\" <b>", 1]]'
    session = make_session([
        {"op": "aten::mm", "time_ns": 1_000, "ranges": '[["outer", 1]]'},
        {"op": "aten::relu", "time_ns": 1_000, "ranges": nested},
        {"op": "aten::add", "time_ns": 1_000, "ranges": nested},   # the last call of both ranges
        {"op": "aten::mul", "time_ns": 1_000},
        {"op": "aten::mm", "time_ns": 1_000, "ranges": '[["outer", 2]]'},
    ])
    trace = trace_dict(session)
    drawn = [e for e in complete_events(trace) if e["cat"] == "user_annotation" and e["pid"] != 1]
    assert [(e["name"], e["args"]["occurrence"], e["args"]["recorded calls"]) for e in drawn] == [
        ("outer", 1, 3), ('inner "x" <b>', 1, 2), ("outer", 2, 1)]
    calls = {e["args"]["External id"]: e for e in complete_events(trace) if e["cat"] == "cpu_op"}
    outer, inner, again = drawn
    assert outer["ts"] == calls[1]["ts"] and inner["ts"] == calls[2]["ts"]
    assert inner["ts"] + inner["dur"] < outer["ts"] + outer["dur"]  # 1 ns apart: they nest, not cross
    assert again["ts"] == calls[5]["ts"] and again["ts"] > outer["ts"] + outer["dur"]
    assert_nested_per_thread(drawn)
    # the calls' own lane holds none of them (dmlprof's phase ranges there could cut across)
    assert not [e for e in complete_events(trace) if e["pid"] == 1 and e["name"] in ("outer", 'inner "x" <b>')]


def test_no_range_lane_without_ranges():
    assert not [e for e in trace_dict(fallback_mix())["traceEvents"] if e["pid"] == 4]
