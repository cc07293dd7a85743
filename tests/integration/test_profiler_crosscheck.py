"""dmlprof's per-op times agree with torch.profiler's own, for the same calls."""
from __future__ import annotations

import pytest

import dmlprof
from dmlprof.analysis import profiler_crosscheck
from conftest import MODELS

pytestmark = pytest.mark.live


def test_per_op_totals_match_torch_profiler_within_10_percent():
    session = dmlprof.scan(MODELS / "lenet5.py", "cpu", steps=3, warmup=1, batch_size=64)
    check = profiler_crosscheck(session.ops, session.profiler_ops).dropna(subset=["profiler_time_ms"])
    assert len(check) >= 10, "the profiler should have timed most ops"
    # every op the profiler saw, it saw as often as we did
    assert (check["calls"] == check["profiler_calls"]).all(), check
    # ops that take real time (>= 0.2 ms per call) agree within 10 %; below that
    # the fixed cost of calling an op from Python dominates either timer
    per_call_ms = check["profiler_time_ms"] / check["profiler_calls"]
    substantial = check[per_call_ms >= 0.2]
    assert len(substantial) >= 3, check
    assert substantial["ratio"].between(0.9, 1.1).all(), substantial
    # and so does their total (the sub-0.2 ms ops' fixed cost, 20-100 us a call on a loaded
    # machine, is noise in either timer, so it is bounded per call instead)
    total_ratio = substantial["time_ms"].sum() / substantial["profiler_time_ms"].sum()
    assert 0.9 <= total_ratio <= 1.1, substantial
    small = check[per_call_ms < 0.2]
    fixed_cost_ms = (small["time_ms"] - small["profiler_time_ms"]).sum() / max(int(small["calls"].sum()), 1)
    assert fixed_cost_ms < 0.5, f"{fixed_cost_ms * 1000:.0f} us a call beyond the profiler's time on small ops"
    assert session.meta["profiler_check"]["matched_ops"] == len(check)
