"""Steady-state recording: matching measured steps' profiler events to the structure step's calls."""
from __future__ import annotations

import pandas as pd

from dmlprof.record import steady
from dmlprof.schema import typed_ops_frame
from dmlprof.record.profiler import MODE_RANGE

COLUMNS = ["name", "start_ns", "time_ns", "device_time_ns", "parent", "grandparent", "thread"]


def _events(rows):
    return pd.DataFrame(rows, columns=COLUMNS)


def _structure_trace(with_mode_range: bool):
    """A step range holding two recorded calls (addmm with a child copy_, relu) as the mode leaves them."""
    rows = [("dmlprof::step#0", 0, 1000, 0, "", "", 1), ("aten::addmm", 10, 300, 0, "dmlprof::step#0", "", 1)]
    inner_parent = "aten::addmm"
    if with_mode_range:
        rows.append((MODE_RANGE, 20, 280, 0, "aten::addmm", "dmlprof::step#0", 1))
        inner_parent = MODE_RANGE
    rows += [
        ("aten::addmm", 30, 200, 0, inner_parent, "aten::addmm" if with_mode_range else "dmlprof::step#0", 1),
        ("aten::copy_", 40, 50, 0, "aten::addmm", inner_parent, 1),
        ("aten::relu", 400, 100, 0, "dmlprof::step#0", "", 1),
    ]
    relu_parent = "aten::relu"
    if with_mode_range:
        rows.append((MODE_RANGE, 410, 80, 0, "aten::relu", "dmlprof::step#0", 1))
        relu_parent = MODE_RANGE
    rows.append(("aten::relu", 420, 60, 0, relu_parent, "aten::relu" if with_mode_range else "dmlprof::step#0", 1))
    return _events(rows)


def _template():
    return typed_ops_frame(pd.DataFrame({
        "seq": [0, 1], "step": [0, 0], "phase": ["forward", "forward"], "op": ["aten::addmm", "aten::relu"],
        "verdict": ["device", "fallback"], "evidence": ["tensors", "fallback warning"],
        "fallback_ops": ["", "aten::relu=1"], "fallback_calls": [0, 1], "module": ["m.fc", "m.act"],
        "source": ["", "model.py:9"], "time_ns": [200, 60],
    }))


def _measured_step(step, offset, addmm_ns, relu_ns, extra=()):
    base = f"dmlprof::step#{step}"
    return _events([
        (base, offset, 1000, 0, "", "", 1),
        ("aten::addmm", offset + 10, addmm_ns, 7, base, "", 1),
        ("aten::copy_", offset + 20, 5, 0, "aten::addmm", base, 1),
        *extra,
        ("aten::relu", offset + 400, relu_ns, 3, base, "", 1),
    ])


def test_collapse_marks_recorded_calls_in_both_torch_layouts():
    for with_mode_range in (False, True):
        kept, is_call = steady.collapse(steady._op_events_in(_structure_trace(with_mode_range), (0, 1000)))
        assert list(kept["name"]) == ["aten::addmm", "aten::copy_", "aten::relu"]
        assert is_call == [True, False, True]


def test_measured_steps_take_their_own_times_and_keep_the_structure():
    structure = steady.Structure.from_template(_template(), _structure_trace(True))
    assert structure is not None
    events = pd.concat([_measured_step(0, 5000, 111, 22), _measured_step(1, 9000, 333, 44)], ignore_index=True)
    windows = steady.step_windows(events)
    assert windows == {0: (5000, 9000), 1: (9000, 10001)}  # each step runs to the next one's start
    second = structure.apply(events, windows[1], 1, origin_ns=5000)
    assert list(second["time_ns"]) == [333, 44]
    assert list(second["start_ns"]) == [4010, 4400]
    assert list(second["step"]) == [1, 1]
    assert list(second["verdict"]) == ["device", "fallback"]  # from the structure step
    assert second["evidence"].iat[1] == "fallback warning (structure step)"
    assert list(second["device_time_ns"]) == [7, 3]


def test_an_extra_op_in_a_step_does_not_shift_the_others():
    structure = steady.Structure.from_template(_template(), _structure_trace(False))
    extra = [("aten::nonzero", 5300, 9, 0, "dmlprof::step#0", "", 1)]
    events = _measured_step(0, 5000, 111, 22, extra)
    frame = structure.apply(events, steady.step_windows(events)[0], 0, 5000)
    assert list(frame["time_ns"]) == [111, 22] and frame.attrs["unmatched_calls"] == 0


def test_a_call_that_changed_keeps_the_structure_timing_and_is_counted(monkeypatch):
    monkeypatch.setattr(steady, "MIN_MATCHED_SHARE", 0.5)  # two calls: allow one to differ
    structure = steady.Structure.from_template(_template(), _structure_trace(False))
    events = _measured_step(0, 5000, 111, 22)
    events.loc[events["name"] == "aten::relu", "name"] = "aten::relu_"  # ran in place this time
    frame = structure.apply(events, steady.step_windows(events)[0], 0, 5000)
    assert frame.attrs["unmatched_calls"] == 1
    assert list(frame["time_ns"]) == [111, 60]  # relu keeps the structure step's 60 ns


def test_a_step_unlike_the_structure_is_not_guessed():
    structure = steady.Structure.from_template(_template(), _structure_trace(False))
    events = _events([
        ("dmlprof::step#0", 5000, 1000, 0, "", "", 1),
        ("aten::gelu", 5010, 10, 0, "dmlprof::step#0", "", 1),
        ("aten::softmax", 5100, 10, 0, "dmlprof::step#0", "", 1),
    ])
    assert structure.apply(events, steady.step_windows(events)[0], 0, 5000) is None


def test_fallback_counts_are_checked_per_step():
    structure = steady.Structure.from_template(_template(), _structure_trace(True))
    assert structure.fallbacks_match(["aten::relu"])
    assert not structure.fallbacks_match([])
    assert not structure.fallbacks_match(["aten::relu", "aten::relu"])


def test_structure_refuses_a_trace_that_does_not_line_up():
    template = _template()
    template.loc[1, "op"] = "aten::gelu"  # the recorded calls say gelu, the trace says relu
    assert steady.Structure.from_template(template, _structure_trace(True)) is None
