"""--no-sync on a real model: a structure step through the dispatcher, measured steps timed by the profiler."""
from __future__ import annotations

import pytest

import dmlprof
from conftest import MODELS

pytestmark = pytest.mark.live


def test_no_sync_scan_matches_every_measured_step_to_the_structure_step():
    every = dmlprof.scan(MODELS / "lenet5.py", "cpu", steps=1, warmup=1, batch_size=8)
    steady = dmlprof.scan(MODELS / "lenet5.py", "cpu", steps=3, warmup=1, batch_size=8, sync=False)
    state = steady.meta.to_dict()["steady_state"]
    assert state["matched_steps"] == 3 and state["unmatched_steps"] == [] and state["fallback_mismatch_steps"] == []
    assert steady.meta.to_dict()["steps"] == 3 and len(steady.meta.to_dict()["step_times_ms"]) == 3
    per_step = [list(group["op"]) for _, group in steady.ops.groupby("step")]
    assert len(per_step) == 3 and per_step[0] == per_step[1] == per_step[2]
    # the same calls, modules and phases a full recording sees
    assert per_step[0] == list(every.ops["op"])
    assert list(steady.ops.loc[steady.ops["step"] == 2, "module"]) == list(every.ops["module"])
    assert list(steady.ops.loc[steady.ops["step"] == 2, "phase"]) == list(every.ops["phase"])
    # each measured step has its own times: no two steps copy each other
    times = [tuple(group["time_ns"]) for _, group in steady.ops.groupby("step")]
    assert len(set(times)) == 3
    assert (steady.ops.groupby("step")["time_ns"].sum() > 0).all()
    assert steady.ops["seq"].is_unique and steady.ops["start_ns"].is_monotonic_increasing
