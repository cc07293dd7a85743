"""``scan --replace``'s comparison: the same step before and after the replacements (pure, no torch)."""
from __future__ import annotations

import statistics
from typing import Callable, Optional, Sequence

import pandas as pd

from dmlprof.analysis.core import summary
from dmlprof.schema import FALLBACK, parse_fallback_ops


def run_numbers(ops: pd.DataFrame, steps: int, step_times_ms: Sequence[float]) -> dict:
    """One side of the comparison: fallback calls (inner calls counted), their share, bytes, step time."""
    numbers = summary(ops)
    steps = max(int(steps or 1), 1)
    per_op: dict = {}
    fallback = ops[ops["verdict"] == FALLBACK]
    for text in fallback["fallback_ops"]:
        for name, count in parse_fallback_ops(text).items():
            per_op[name] = per_op.get(name, 0) + count
    return {
        "steps": steps,
        "fallback_calls": int(numbers["inner_fallback_calls"]),
        "fallback_calls_per_step": numbers["inner_fallback_calls"] / steps,
        "fallback_time_share": float(numbers["fallback_time_share"]),
        # What a fallback costs on real hardware: these bytes cross between device and host each step.
        "fallback_bytes_moved_per_step": int(fallback["bytes_moved"].sum()) / steps,
        "step_time_ms": float(statistics.median(step_times_ms)) if step_times_ms else None,
        "fallback_ops": dict(sorted(per_op.items(), key=lambda kv: -kv[1])),
    }


def replace_comparison(before: dict, after: dict, applied: list,
                       advice: Callable[[str], Optional[str]] = lambda op: None) -> dict:
    """What ``--replace`` stores in ``extras["replace"]``, from two :func:`run_numbers`.

    ``advice(op)`` names the fix for an op that still falls back (the replacements' catalog).
    """
    b, a = before, after
    speedup = (b["step_time_ms"] / a["step_time_ms"]) if b["step_time_ms"] and a["step_time_ms"] else None
    return {
        "before": b,
        "after": a,
        "fallback_calls_removed": b["fallback_calls"] - a["fallback_calls"],
        "step_time_speedup": speedup,
        "removed_ops": sorted(set(b["fallback_ops"]) - set(a["fallback_ops"])),
        "remaining_ops": [{"op": op, "calls": calls, "replacement": advice(op)}
                          for op, calls in a["fallback_ops"].items()],
        "applied": applied,
    }
