"""The JSON report (schema: docs/report_schema.md)."""
from __future__ import annotations

import json

import pandas as pd

from dmlprof import analysis

SCHEMA_VERSION = 1
_META_KEYS = (
    "dmlprof_version", "torch_version", "python_version", "platform", "backend", "device", "device_name",
    "backend_versions", "mode", "run_mode", "model", "model_name", "batch_size", "warmup_steps", "steps",
    "steps_requested", "optimizer", "sync", "timing", "table_version", "partial", "partial_reason",
    "started_at", "duration_s", "step_times_ms", "memory", "profiler_check", "unknown_ops",
    "recording", "steady_state", "structure_step_ms", "notes", "device_time_check", "verify", "nonfinite_loss",
)


def report_dict(session) -> dict:
    """The report as plain data."""
    ops = session.ops
    per_op = analysis.op_summary(ops)
    hotspots = analysis.fallback_hotspots(ops)
    from dmlprof.replacements import advice_for_hotspot

    return {
        "schema_version": SCHEMA_VERSION,
        "meta": {key: session.meta.get(key) for key in _META_KEYS if key in session.meta},
        "summary": analysis.summary(ops),
        "phases": analysis.phase_split(ops).to_dict(orient="records"),
        "ops": [
            {"op": r.op, "verdict": r.verdict, "phase": r.phase, "calls": int(r.calls), "time_ms": float(r.time_ms),
             "device_time_ms": None if pd.isna(r.device_time_ms) else float(r.device_time_ms),
             "share": float(r.share), "bytes_moved": int(r.bytes_moved),
             "fallback_ops": sorted(x.split("=")[0] for x in r.fallback_ops.split(";") if x)}
            for r in per_op.itertuples()
        ],
        "fallbacks": [
            {"op": r.op, "inner_ops": list(r.inner_ops), "calls": int(r.calls), "inner_calls": int(r.inner_calls),
             "time_ms": float(r.time_ms), "share": float(r.share), "bytes_moved": int(r.bytes_moved),
             "phases": list(r.phases), "modules": list(r.modules), "sources": list(r.sources),
             "replacement": advice_for_hotspot(list(r.inner_ops) or [r.op])}
            for r in hotspots.itertuples()
        ],
        "transfers": analysis.transfer_hotspots(ops).to_dict(orient="records"),
        "cpu_calls": analysis.cpu_hotspots(ops).to_dict(orient="records"),
        "warnings": session.meta.get("warnings", []),
        "verification": _verification(session),
        "extras": session.extras,
    }


def _verification(session):
    """``scan --verify``'s findings grouped per op and parameter (None when not verified; raw in extras.verify)."""
    from dmlprof.verify import summary

    return summary(session.extras.get("verify") if isinstance(session.extras, dict) else None)


def render_json(session) -> str:
    from dmlprof.session import _json_safe

    return json.dumps(_json_safe(report_dict(session)), indent=2, allow_nan=False)
