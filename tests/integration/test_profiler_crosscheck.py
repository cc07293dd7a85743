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
    # and so does the total over every op both timed
    total_ratio = check["time_ms"].sum() / check["profiler_time_ms"].sum()
    assert 0.9 <= total_ratio <= 1.1, check
    assert session.meta["profiler_check"]["matched_ops"] == len(check)
