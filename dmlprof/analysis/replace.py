"""``scan --replace``'s comparison: the same step before and after the replacements (pure, no torch)."""
from __future__ import annotations

import statistics
from typing import Callable, Optional, Sequence

import pandas as pd

from dmlprof.analysis.core import summary
from dmlprof.schema import FALLBACK, parse_fallback_ops


def run_numbers(ops: pd.DataFrame, steps: int, step_times_ms: Sequence[float]) -> dict:
    """One side of the comparison: calls that fell back, their share, bytes, step time.

    Counted as the plain scan counts them (its headline, its hotspot table): one per call that fell
    back, a composite such as ``_foreach_lerp_`` once however many inner calls it sent to the CPU
    (those are ``inner_fallback_calls``), and shares of the work, host bookkeeping left out.
    """
    numbers = summary(ops)
    steps = max(int(steps or 1), 1)
    fallback = ops[ops["verdict"] == FALLBACK]
    per_op = fallback["op"].value_counts(sort=False).to_dict()
    inner: dict = {}
    for op, text in zip(fallback["op"], fallback["fallback_ops"]):
        inner.setdefault(op, set()).update(parse_fallback_ops(text) or (op,))
    return {
        "steps": steps,
        "fallback_calls": int(numbers["fallback_calls"]),
        "inner_fallback_calls": int(numbers["inner_fallback_calls"]),
        "fallback_calls_per_step": numbers["fallback_calls"] / steps,
        "fallback_time_share": float(numbers["fallback_time_share"]),
        # What a fallback costs on real hardware: these bytes cross between device and host each step.
        "fallback_bytes_moved_per_step": int(fallback["bytes_moved"].sum()) / steps,
        "step_time_ms": float(statistics.median(step_times_ms)) if step_times_ms else None,
        "fallback_ops": {op: int(n) for op, n in sorted(per_op.items(), key=lambda kv: (-kv[1], kv[0]))},
        "inner_ops": {op: sorted(names) for op, names in sorted(inner.items())},  # what each sent to the CPU
    }


def replace_comparison(before: dict, after: dict, applied: list,
                       advice: Callable[[str], Optional[str]] = lambda op: None) -> dict:
    """What ``--replace`` stores in ``extras["replace"]``, from two :func:`run_numbers`.

    ``advice(op)`` names the fix for an op that still falls back (the replacements' catalog, asked
    about each inner op it sent to the CPU).
    """
    b, a = before, after
    speedup = (b["step_time_ms"] / a["step_time_ms"]) if b["step_time_ms"] and a["step_time_ms"] else None
    return {
        "before": b,
        "after": a,
        "fallback_calls_removed": b["fallback_calls"] - a["fallback_calls"],
        "step_time_speedup": speedup,
        "removed_ops": sorted(set(b["fallback_ops"]) - set(a["fallback_ops"])),
        "remaining_ops": [{"op": op, "calls": calls, "replacement": _first_advice(a, op, advice)}
                          for op, calls in a["fallback_ops"].items()],
        "applied": applied,
    }


def _first_advice(side: dict, op: str, advice: Callable[[str], Optional[str]]) -> Optional[str]:
    return next((tip for name in side.get("inner_ops", {}).get(op) or [op] for tip in [advice(name)] if tip), None)
