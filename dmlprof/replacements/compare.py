"""``dmlprof scan --replace``: scan a model file as it is, then with the replacements applied, and compare.

The comparison (fallback calls, fallback time share, step time, which fallback
ops went away and which remain) is stored in the patched run's
``session.extras["replace"]`` and printed by :func:`format_comparison`.
"""
from __future__ import annotations

import functools
import statistics
from typing import Optional

from dmlprof.errors import DeviceError, ModelRaisedError


def scan_replaced(path, device: str = "auto", **options):
    """Scan ``path`` twice, plain and patched; returns the patched Session with ``extras["replace"]``
    holding the comparison. ``options`` are :func:`dmlprof.runner.scan`'s.

    A model file gets ``dmlprof.patch(model, optimizer)`` plus its loss under the replacements; a
    script runs entirely under the replacement mode."""
    from dmlprof.model_file import inspect_model_file
    from dmlprof.runner import ScanStopped, scan

    contract = inspect_model_file(path).mode == "contract"
    before_error = None
    try:
        try:
            before = scan(path, device, **options)
        except (ModelRaisedError, DeviceError):  # failed while warming up: record up to the failure instead
            before = scan(path, device, **dict(options, warmup=0))
    except ScanStopped as stopped:  # e.g. a fallback with no CPU kernel behind it: compare with what ran
        before, before_error = stopped.session, str(stopped.cause).splitlines()[0][:300]
    applied: list = []
    if contract:
        after = scan(path, device, prepare=lambda training: apply_to_training_step(training, applied), **options)
    else:
        # A script builds its own model and optimizer, out of reach: run all of it under the
        # replacement mode instead, which covers functional calls, RNNs and the optimizer's lerp
        # (not a fused optimizer, which needs the optimizer object).
        from dmlprof.replacements.patching import ReplacementMode

        applied.append({"target": "script", "what": "every torch call runs under the replacements"})
        with ReplacementMode():
            after = scan(path, device, **options)
    after.meta["replacements_applied"] = len(applied)
    after.extras["replace"] = comparison(before, after, applied)
    if before_error:
        after.extras["replace"]["before"]["error"] = before_error
    return after


def apply_to_training_step(training, applied: Optional[list] = None):
    """Patch a :class:`dmlprof.runner.TrainingStep`: its model and optimizer (``dmlprof.patch``) and its loss."""
    from dmlprof.replacements.patching import _run_replaced, patch

    handle = patch(training.model, training.optimizer)
    training.loss_fn = functools.partial(_run_replaced, training.loss_fn)
    if applied is not None:
        applied.extend(handle.applied + [{"target": "loss", "what": "loss runs under the replacements"}])
    return handle


def _headline(session) -> dict:
    from dmlprof.analysis.core import summary
    from dmlprof.record.frame import parse_fallback_ops

    numbers = summary(session.ops)
    steps = max(int(session.meta.get("steps") or 1), 1)
    per_op: dict = {}
    fallback = session.ops[session.ops["verdict"] == "fallback"]
    for text in fallback["fallback_ops"]:
        for name, count in parse_fallback_ops(text).items():
            per_op[name] = per_op.get(name, 0) + count
    step_times = session.meta.get("step_times_ms") or []
    return {
        "steps": steps,
        "fallback_calls": int(numbers["inner_fallback_calls"]),
        "fallback_calls_per_step": numbers["inner_fallback_calls"] / steps,
        "fallback_time_share": float(numbers["fallback_time_share"]),
        # What a fallback costs on real hardware: these bytes cross between device and host each step.
        "fallback_bytes_moved_per_step": int(fallback["bytes_moved"].sum()) / steps,
        "step_time_ms": float(statistics.median(step_times)) if step_times else None,
        "fallback_ops": dict(sorted(per_op.items(), key=lambda kv: -kv[1])),
    }


def comparison(before, after, applied: list) -> dict:
    """The before/after numbers ``--replace`` stores in ``extras["replace"]``."""
    from dmlprof.replacements import advice_for

    b, a = _headline(before), _headline(after)
    speedup = (b["step_time_ms"] / a["step_time_ms"]) if b["step_time_ms"] and a["step_time_ms"] else None
    return {
        "before": b,
        "after": a,
        "fallback_calls_removed": b["fallback_calls"] - a["fallback_calls"],
        "step_time_speedup": speedup,
        "removed_ops": sorted(set(b["fallback_ops"]) - set(a["fallback_ops"])),
        "remaining_ops": [{"op": op, "calls": calls, "replacement": advice_for(op)}
                          for op, calls in a["fallback_ops"].items()],
        "applied": applied,
    }


def format_comparison(data: dict) -> str:
    """The terminal block for ``extras["replace"]``."""
    from dmlprof.render.format import clean, fmt_bytes

    b, a = data["before"], data["after"]

    def ms(value):
        return "-" if value is None else f"{value:.1f} ms"

    speed = data.get("step_time_speedup")
    lines = [
        f"With dmlprof's replacements ({len(data.get('applied', []))} changes: dmlprof.patch(model, optimizer) + loss)",
        f"  {'':24}{'before':>12}{'after':>12}",
    ]
    if b.get("error"):
        lines.append(f"  before: the unpatched step failed ({clean(b['error'][:160])}); numbers are up to the failure")
    lines += [
        f"  {'fallback calls':24}{b['fallback_calls']:>12}{a['fallback_calls']:>12}",
        f"  {'fallback calls per step':24}{b['fallback_calls_per_step']:>12.1f}{a['fallback_calls_per_step']:>12.1f}",
        f"  {'fallback time share':24}{b['fallback_time_share']:>12.1%}{a['fallback_time_share']:>12.1%}",
        f"  {'fallback bytes per step':24}{fmt_bytes(b['fallback_bytes_moved_per_step']):>12}"
        f"{fmt_bytes(a['fallback_bytes_moved_per_step']):>12}",
        f"  {'step time (median)':24}{ms(b['step_time_ms']):>12}{ms(a['step_time_ms']):>12}"
        + (f"   ({speed:.2f}x)" if speed else ""),
    ]
    if data["removed_ops"]:
        lines.append("  removed: " + clean(", ".join(data["removed_ops"])))
    for row in data["remaining_ops"]:
        tip = row["replacement"] or "no replacement known"
        lines.append(clean(f"  still falls back: {row['op']} ({row['calls']} calls): {tip}"))
    if not data["remaining_ops"]:
        lines.append("  after patching: no fallback calls")
    return "\n".join(lines)
