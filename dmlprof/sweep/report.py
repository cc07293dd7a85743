"""A sweep as text (tabulate) and as the JSON document of docs/sweep_schema.md.

Both work from a Session whose ``extras["sweep"]`` holds the sweep, so a saved
sweep re-renders without running anything.
"""
from __future__ import annotations

import json

import pandas as pd

from dmlprof.analysis.sweep import KNEE_MIN_GROWTH, fits_budget, growth_per_doubling, sweep_frame
from dmlprof.render.format import clean, fmt_bytes, fmt_ms, fmt_share, table

SCHEMA_VERSION = 1
#: a size whose step p95 exceeds this many times its p50 is flagged as noisy
NOISY_P95_OVER_P50 = 2.0
FORMAT = "dmlprof-sweep"
_META_KEYS = ("dmlprof_version", "torch_version", "python_version", "platform", "backend", "device", "device_name",
              "model", "model_name", "started_at", "duration_s", "partial", "memory_budget", "memory_total_bytes",
              "sweep_settings", "sweep_notes")


def sweep_document(session) -> dict:
    """The ``--json`` document: format header, run facts, the sweep, why it stopped, per-size details."""
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "meta": {key: session.meta.get(key) for key in _META_KEYS if key in session.meta},
        "sweep": session.extras.get("sweep", {}),
        "stop_reason": session.meta.get("sweep_stop_reason", ""),
        "details": session.meta.get("sweep_details", []),
    }


def render_sweep_json(session) -> str:
    from dmlprof.session import _json_safe

    return json.dumps(_json_safe(sweep_document(session)), indent=2, allow_nan=False)


def render_sweep_text(session) -> str:
    """The sweep table and its verdicts as plain ASCII text."""
    meta = session.meta
    sweep = session.extras.get("sweep") or {}
    rows = sweep.get("rows") or []
    title = clean(f"dmlprof batch-size sweep of {meta.get('model_name') or meta.get('model')}")
    lines = [title, "=" * len(title)]
    settings = meta.get("sweep_settings") or {}
    run = f"{settings.get('steps', '?')} timed steps after {settings.get('warmup_steps', '?')} warm-up, one process per size"
    if settings.get("amp"):
        run += f", autocast {settings['amp']}"
    facts = [("device", f"{meta.get('backend')} ({meta.get('device_name')})"), ("torch", meta.get("torch_version")),
             ("run", run), ("memory budget", meta.get("memory_budget", "-"))]
    lines.append(table(facts, tablefmt="plain"))
    lines.append("")
    if not rows:
        lines.append("No batch size ran.")
    else:
        frame = sweep_frame(rows)
        budget = sweep.get("memory_budget_bytes")
        fits = fits_budget(frame, budget)
        growth = growth_per_doubling(frame).set_index("batch_size")["growth_per_doubling"]
        recommended, knee = sweep.get("recommended_batch_size"), sweep.get("knee_batch_size")
        size_rows = []
        noisy = False
        for i, row in frame.iterrows():
            ok = row["status"] == "ok"
            marks = []
            if row["batch_size"] == recommended:
                marks.append("<- recommended")
            if row["batch_size"] == knee:
                marks.append("knee")
            if ok and not fits[i]:
                marks.append("over budget")
            if ok and row["step_ms_p95"] > NOISY_P95_OVER_P50 * row["step_ms_p50"]:
                marks.append("noisy")
                noisy = True
            if not ok and row["error"]:
                marks.append(_short(row["error"]))
            peak = row["peak_memory_bytes"]
            g = growth.get(row["batch_size"]) if ok else None
            size_rows.append([
                int(row["batch_size"]),
                row["status"],
                f"{row['samples_per_s']:.1f}" if ok else "-",
                f"{100 * g:+.0f}%" if g is not None and g == g else "-",
                fmt_ms(row["step_ms_p50"]) if ok else "-",
                fmt_ms(row["step_ms_p95"]) if ok else "-",
                "-" if pd.isna(peak) else fmt_bytes(int(peak)),
                fmt_share(row["fallback_time_share"]) if ok else "-",
                "; ".join(marks),
            ])
        lines.append(table(size_rows, headers=["batch", "status", "samples/s", "per 2x", "step p50", "step p95",
                                              "peak memory", "fallback", ""], disable_numparse=True))
        sources = sorted({r["memory_source"] for r in rows if r.get("memory_source")})
        if sources:
            lines.append(clean(f"peak memory: {', '.join(sources)}"))
        if noisy:
            lines.append(f"noisy: step p95 over {NOISY_P95_OVER_P50:g}x p50 (other load on the machine, throttling, "
                         "lazy initialisation); throughput uses the median, but rerun with more --steps to be sure")
        details = meta.get("sweep_details") or []
        fallen = sorted({op for d in details for op in (d.get("fallback_ops") or [])})
        if fallen:
            lines.append(clean(f"fell back to the CPU (one recorded step per size): {', '.join(fallen)}"))
        elif details and not any(d.get("fallback_recorded") for d in details):
            lines.append("fallback: not recorded (this backend cannot fall back to the CPU)")
        lines.append("")
        lines.append(_recommendation_line(recommended, frame, budget))
        lines.append(_knee_line(knee, frame))
    if meta.get("sweep_stop_reason"):
        lines.append(clean(f"stopped: {meta['sweep_stop_reason']}"))
    for note in meta.get("sweep_notes") or ():
        lines.append(clean(f"note: {note}"))
    return "\n".join(lines)


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _recommendation_line(recommended, frame, budget) -> str:
    ok = frame[frame["status"] == "ok"]
    if recommended is not None:
        rate = float(frame.loc[frame["batch_size"] == recommended, "samples_per_s"].iloc[0])
        within = " within the memory budget" if budget is not None else ""
        return f"recommended batch size: {recommended} ({rate:.1f} samples/s, the best throughput{within})"
    if ok.empty:
        return "recommended batch size: none (no size ran to the end)"
    return "recommended batch size: none (no size that ran fits in the memory budget; try smaller sizes or --memory-budget)"


def _knee_line(knee, frame) -> str:
    threshold = f"{100 * KNEE_MIN_GROWTH:.0f}%"
    if knee is not None:
        return f"knee: {knee} (past it, throughput grows less than {threshold} per doubling)"
    if len(frame[frame["status"] == "ok"]) < 2:
        return "knee: unknown (fewer than two sizes ran)"
    return f"knee: not reached (throughput still grows {threshold} or more per doubling at the largest size)"
