"""The HTML report: one self-contained file (inline CSS, JS and data; opens offline).

Built in two steps, memray style: :func:`report_data` turns a Session into
plain data (everything the page shows, computed by :mod:`dmlprof.analysis`),
and :func:`render_html` renders that data with the Jinja2 template shipped in
``dmlprof/render/templates``. Tests check the data; the browser test checks
the page.

Everything that comes from the model (module paths, op names, source lines,
error messages) is escaped: Jinja2 autoescaping for markup, and the JSON the
page's script reads is inlined with ``<``, ``>`` and ``&`` written as ``\\u``
escapes, so no name can close the ``<script>`` element; the script itself only
ever sets ``textContent``.
"""
from __future__ import annotations

import json
import math
from statistics import median
from typing import Optional

import pandas as pd

from dmlprof import analysis
from dmlprof.render.format import fmt_bytes, fmt_list, fmt_ms, fmt_share

#: bump when report_data's shape changes (the page's script reads it)
DATA_VERSION = 1
#: ops drawn in the "time by op" chart
CHART_TOP_OPS = 15
#: module tree rows below this depth start collapsed when the tree is large
_TREE_OPEN_DEPTH = 2
_TREE_LARGE = 60
_PHASE_ORDER = ("forward", "backward", "optimizer", "other")


# -- data ----------------------------------------------------------------------
def report_data(session) -> dict:
    """Everything the HTML report shows, as plain JSON-able data.

    Keys: ``meta`` (run facts), ``flags`` (partial / predicted / cpu notes),
    ``cards`` (headline figures), ``summary`` (analysis.summary), ``hotspots``
    (fallbacks ranked by time, each with its replacement or None),
    ``transfers``, ``ops`` (one row per op, verdict and phase: the sortable
    table), ``modules`` (the module tree), ``phases``, ``charts`` (bar
    geometry for the inline SVG charts), ``sweep`` (None without a sweep) and
    ``verify`` (``scan --verify``'s divergent ops and lost updates; None without one).
    """
    meta, ops = session.meta, session.ops
    head = analysis.summary(ops) if len(ops) else _empty_summary()
    timed = head["time_ms"] > 0
    data = {
        "data_version": DATA_VERSION,
        "title": _title(meta),
        "meta": _meta_facts(meta),
        "flags": _flags(session, timed),
        "summary": _plain(head),
        "timed": timed,
        "cards": _cards(meta, head, timed),
        "hotspots": _hotspots(ops),
        "transfers": _transfers(ops, meta),
        "ops": _op_rows(ops),
        "modules": _module_rows(ops),
        "phases": _phase_rows(ops),
        "charts": {},
        "sweep": _sweep(session.extras.get("sweep") if isinstance(session.extras, dict) else None),
        "replace": _replace(session.extras.get("replace") if isinstance(session.extras, dict) else None),
        "verify": _verify(session.extras.get("verify") if isinstance(session.extras, dict) else None),
        "warnings": [
            {"category": str(w.get("category", "")), "count": int(w.get("count", 1) or 1),
             "message": str(w.get("message", "")).splitlines()[0][:300] if w.get("message") else ""}
            for w in (meta.get("warnings") or []) if isinstance(w, dict)
        ],
    }
    data["charts"] = {
        "time_by_op": _time_by_op_chart(ops),
        "verdict_split": _verdict_split(head),
    }
    return data


def _empty_summary() -> dict:
    return {
        "op_calls": 0, "device_calls": 0, "fallback_calls": 0, "cpu_calls": 0, "inner_fallback_calls": 0,
        "device_call_share": 0.0, "time_ms": 0.0, "device_time_ms_on_device": None, "device_op_time_ms": 0.0,
        "device_time_share": 0.0, "fallback_time_ms": 0.0, "fallback_time_share": 0.0, "cpu_time_ms": 0.0,
        "bytes_moved": 0, "distinct_ops": 0, "distinct_fallback_ops": 0,
    }


def _title(meta) -> str:
    model = meta.get("model_name") or meta.get("model") or "model"
    mode = "predicted" if meta.get("mode") == "predicted" else "live"
    return f"dmlprof {mode} scan of {model}"


def _meta_facts(meta) -> dict:
    versions = meta.get("backend_versions") or {}
    if not isinstance(versions, dict):
        versions = {"backend": str(versions)}
    steps = meta.get("step_times_ms") or []
    memory = meta.get("memory") if isinstance(meta.get("memory"), dict) else {}
    return {
        "model": str(meta.get("model", "")),
        "model_name": str(meta.get("model_name", "")),
        "backend": str(meta.get("backend", "")),
        "device": str(meta.get("device", "")),
        "device_name": str(meta.get("device_name", "")),
        "torch_version": str(meta.get("torch_version", "")),
        "dmlprof_version": str(meta.get("dmlprof_version", "")),
        "python_version": str(meta.get("python_version", "")),
        "platform": str(meta.get("platform", "")),
        "backend_versions": {str(k): str(v) for k, v in versions.items()},
        "mode": "predicted" if meta.get("mode") == "predicted" else "live",
        "run_mode": str(meta.get("run_mode", "")),
        "batch_size": meta.get("batch_size"),
        "warmup_steps": meta.get("warmup_steps"),
        "steps": meta.get("steps"),
        "optimizer": str(meta.get("optimizer", "") or ""),
        "timing": str(meta.get("timing", "") or ""),
        "table_version": str(meta.get("table_version", "") or ""),
        "started_at": str(meta.get("started_at", "") or ""),
        "duration_s": meta.get("duration_s"),
        "step_time_ms_p50": float(median(steps)) if steps else None,
        "measured_steps": len(steps),
        "recording": str(meta.get("recording", "") or ""),
        "profiler_check": _profiler_check(meta.get("profiler_check")),
        "peak_memory_bytes": memory.get("peak_bytes"),
        "memory_source": str(memory.get("source", "") or ""),
    }


def _profiler_check(check) -> str:
    """torch.profiler's totals next to ours for the ops both timed, as one line ('' when absent)."""
    if not isinstance(check, dict) or not check.get("matched_ops"):
        return ""
    try:
        return (f"{int(check['matched_ops'])} ops timed by both: dmlprof {fmt_ms(check['time_ms'])}, "
                f"torch.profiler {fmt_ms(check['profiler_time_ms'])} (ratio {float(check['ratio']):.2f})")
    except (KeyError, TypeError, ValueError):
        return ""


def _flags(session, timed: bool) -> list:
    """Notes shown above everything else: what makes these numbers special."""
    meta = session.meta
    flags = []
    if meta.get("partial"):
        flags.append({"tone": "warn", "label": "Partial session",
                      "text": f"The run stopped early: {meta.get('partial_reason') or 'no reason recorded'}. "
                              "The figures cover only the steps that ran."})
    loss = meta.get("nonfinite_loss")
    if isinstance(loss, dict):
        flags.append({"tone": "warn", "label": "Loss not finite",
                      "text": f"The loss was {loss.get('value')} at training step {loss.get('step')} of "
                              f"{loss.get('steps_run')} (warm-up included): the training diverges."})
    predicted = meta.get("mode") == "predicted"
    if predicted:
        table = meta.get("table_version") or "unknown table"
        times = ("Times were measured on the host that made the prediction, not on the device." if timed
                 else "A prediction has no per-call times, so shares by time are not shown.")
        flags.append({"tone": "info", "label": "Predicted",
                      "text": f"No device ran this: verdicts come from the op table {table}. {times}"})
    if not timed and len(session.ops) and not predicted:
        flags.append({"tone": "info", "label": "No timings", "text": "This session has no per-call times; shares by time are not shown."})
    if meta.get("backend") == "cpu" and meta.get("mode") != "predicted":
        flags.append({"tone": "info", "label": "CPU run",
                      "text": "The CPU was the device, so nothing can fall back. "
                              "Scan with --device (or predict with --target dml) to check an accelerator."})
    notes = meta.get("notes") or []
    for note in notes if isinstance(notes, list) else [notes]:
        flags.append({"tone": "info", "label": "Note", "text": str(note)})
    if not len(session.ops):
        flags.append({"tone": "warn", "label": "Empty", "text": "No op calls were recorded."})
    return flags


def _cards(meta, head, timed: bool) -> list:
    facts = _meta_facts(meta)
    versions = ", ".join(f"{k} {v}" for k, v in facts["backend_versions"].items())
    device_detail = f"torch {facts['torch_version']}" + (f" \u00b7 {versions}" if versions else "")
    mode_value = facts["mode"]
    if facts["mode"] == "predicted":
        mode_detail = f"op table {facts['table_version'] or 'unknown'}"
    elif facts["run_mode"] == "script":
        mode_detail = f"script mode \u00b7 {facts['steps'] or 0} optimizer steps"
    else:
        mode_detail = (f"batch {facts['batch_size']} \u00b7 {facts['steps'] or 0} steps"
                       + (f" \u00b7 {facts['optimizer']}" if facts["optimizer"] else ""))
    cards = [
        {"key": "device", "label": "Device", "value": facts["backend"] or "?",
         "detail": (facts["device_name"] + " \u00b7 " if facts["device_name"] else "") + device_detail, "tone": ""},
        {"key": "mode", "label": "Mode", "value": mode_value, "detail": mode_detail,
         "tone": "info" if mode_value == "predicted" else ""},
        {"key": "coverage_calls", "label": "On device, by calls", "value": fmt_share(head["device_call_share"]),
         "detail": f"{head['device_calls']:,} of {head['op_calls']:,} op calls",
         "tone": _coverage_tone(head["device_call_share"], head["op_calls"])},
        {"key": "coverage_time", "label": "On device, by time",
         "value": fmt_share(head["device_time_share"]) if timed else "n/a",
         "detail": f"{fmt_ms(head['device_op_time_ms'])} of {fmt_ms(head['time_ms'])} op time" if timed else "no per-call times",
         "tone": _coverage_tone(head["device_time_share"], head["op_calls"]) if timed else ""},
        {"key": "fallback_time", "label": "Fallback time share",
         "value": fmt_share(head["fallback_time_share"]) if timed else "n/a",
         "detail": f"{head['fallback_calls']:,} calls \u00b7 {head['distinct_fallback_ops']} distinct ops"
                   + (f" \u00b7 {fmt_ms(head['fallback_time_ms'])}" if timed else ""),
         "tone": "bad" if head["fallback_calls"] else "good"},
    ]
    if facts["step_time_ms_p50"] is not None:
        memory = facts["peak_memory_bytes"]
        cards.append({"key": "step_time", "label": "Step time (median)", "value": fmt_ms(facts["step_time_ms_p50"]),
                      "detail": f"{facts['measured_steps']} measured steps"
                                + (f" \u00b7 peak memory {fmt_bytes(memory)}" if memory else ""), "tone": ""})
    return cards


def _coverage_tone(share: float, calls: int) -> str:
    if not calls:
        return ""
    return "good" if share >= 0.99 else "warn" if share >= 0.9 else "bad"


def _hotspots(ops: pd.DataFrame) -> list:
    from dmlprof.replacements import advice_for_hotspot

    if not len(ops):
        return []
    fallen = ops[ops["verdict"] == "fallback"]
    # where each hotspot costs most, first: the module and line to look at
    modules = _ranked_by_time(fallen, "module")
    sources = _ranked_by_time(fallen, "source")
    rows = []
    for rank, r in enumerate(analysis.fallback_hotspots(ops).itertuples(), start=1):
        inner = [str(x) for x in r.inner_ops]
        rows.append({
            "rank": rank,
            "op": str(r.op),
            "inner_ops": inner,
            "calls": int(r.calls),
            "inner_calls": int(r.inner_calls),
            "time_ms": float(r.time_ms),
            "time": fmt_ms(r.time_ms),
            "share": float(r.share),
            "share_text": fmt_share(r.share),
            "bytes_moved": int(r.bytes_moved),
            "moved": fmt_bytes(r.bytes_moved),
            "phases": [str(x) for x in r.phases],
            "modules": modules.get(r.op, []),
            "sources": sources.get(r.op, []),
            "replacement": advice_for_hotspot(inner or [str(r.op)]),
        })
    return rows


def _ranked_by_time(frame: pd.DataFrame, column: str) -> dict:
    """op -> the non-empty values of ``column`` for its calls, most time first."""
    if frame.empty:
        return {}
    grouped = frame[frame[column] != ""].groupby(["op", column], sort=False)["time_ns"].sum().reset_index()
    grouped = grouped.sort_values(["op", "time_ns", column], ascending=[True, False, True], kind="stable")
    return {str(op): [str(v) for v in group[column]] for op, group in grouped.groupby("op", sort=False)}


def _transfers(ops: pd.DataFrame, meta) -> list:
    if not len(ops) or meta.get("backend") == "cpu":
        return []
    return [
        {"op": str(r.op), "transfer": str(r.transfer), "calls": int(r.calls), "bytes_moved": int(r.bytes_moved),
         "moved": fmt_bytes(r.bytes_moved), "time_ms": float(r.time_ms), "time": fmt_ms(r.time_ms),
         "phases": [str(x) for x in r.phases], "sources": [str(x) for x in r.sources]}
        for r in analysis.transfer_hotspots(ops).itertuples()
    ]


def _op_rows(ops: pd.DataFrame) -> list:
    """One row per (op, verdict, phase): the per-op table.

    Rows are aggregated (a 100,000-call session is a few hundred rows) and
    written as compact arrays; ``OP_ROW_FIELDS`` names the positions.
    """
    if not len(ops):
        return []
    per_op = analysis.op_summary(ops)
    # the module and source where each group spent most time: where to look first
    top_module = _top_by_time(ops, "module")
    top_source = _top_by_time(ops, "source")
    rows = []
    for r in per_op.itertuples():
        key = (r.op, r.verdict, r.phase)
        inner = sorted(x.rpartition("=")[0] for x in str(r.fallback_ops).split(";") if x)
        rows.append([
            str(r.op), str(r.verdict), str(r.phase), int(r.calls), round(float(r.time_ms), 6), round(float(r.share), 6),
            int(r.bytes_moved), ",".join(inner), top_module.get(key, ""), top_source.get(key, ""),
        ])
    return rows


OP_ROW_FIELDS = ("op", "verdict", "phase", "calls", "time_ms", "share", "bytes_moved", "fallback_ops", "module", "source")
MODULE_ROW_FIELDS = ("module", "label", "depth", "parent", "calls", "time_ms", "device_share", "fallback_share",
                     "cpu_share", "fallback_calls", "fallback_time_ms", "open")


def _top_by_time(ops: pd.DataFrame, column: str) -> dict:
    grouped = ops.groupby(["op", "verdict", "phase", column], sort=False)["time_ns"].agg(["sum", "size"]).reset_index()
    grouped = grouped.sort_values(["sum", "size"], ascending=False, kind="stable")
    grouped = grouped.drop_duplicates(["op", "verdict", "phase"])
    return {(o, v, p): str(x) for o, v, p, x in zip(grouped["op"], grouped["verdict"], grouped["phase"], grouped[column])}


def _module_rows(ops: pd.DataFrame) -> list:
    """The module tree, parents before children, with device/fallback/CPU shares of time."""
    if not len(ops):
        return []
    frame = analysis.module_summary(ops)
    names = set(frame["module"])
    large = len(frame) > _TREE_LARGE
    rows = []
    for r in frame.itertuples():
        time_ms = float(r.time_ms)
        fallback_share = float(r.fallback_time_ms) / time_ms if time_ms else 0.0
        device_share = float(r.device_share)
        name = str(r.module)
        rows.append({
            "module": name,
            "label": name.rsplit(".", 1)[-1],
            "depth": int(r.depth),
            "parent": name.rsplit(".", 1)[0] if "." in name else "",
            "has_children": False,
            "calls": int(r.calls),
            "time_ms": time_ms,
            "time": fmt_ms(time_ms),
            "device_share": device_share,
            "fallback_share": fallback_share,
            "cpu_share": max(0.0, 1.0 - device_share - fallback_share) if time_ms else 0.0,
            "fallback_calls": int(r.fallback_calls),
            "fallback_time_ms": float(r.fallback_time_ms),
            "open": not large or int(r.depth) < _TREE_OPEN_DEPTH,
        })
    parents = {row["parent"] for row in rows if row["parent"] in names}
    for row in rows:
        row["has_children"] = row["module"] in parents
    # depth-first, children in natural order (blocks.2 before blocks.10)
    rows.sort(key=lambda row: _natural_path(row["module"]))
    return rows


def _natural_path(module: str) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in module.split("."))


def _phase_rows(ops: pd.DataFrame) -> list:
    if not len(ops):
        return []
    frame = analysis.phase_split(ops)
    biggest = float(frame["time_ms"].max() or 0.0)
    rows = []
    for r in frame.itertuples():
        time_ms = float(r.time_ms)
        rows.append({
            "phase": str(r.phase), "calls": int(r.calls), "time_ms": time_ms, "time": fmt_ms(time_ms),
            "share": float(r.share), "share_text": fmt_share(r.share), "fallback_calls": int(r.fallback_calls),
            "fallback_time_ms": float(r.fallback_time_ms), "fallback_time": fmt_ms(r.fallback_time_ms),
            "cpu_calls": int(r.cpu_calls),
            # bar lengths relative to the biggest phase (0..1)
            "bar": time_ms / biggest if biggest else 0.0,
            "fallback_bar": float(r.fallback_time_ms) / biggest if biggest else 0.0,
        })
    return rows


def _time_by_op_chart(ops: pd.DataFrame) -> dict:
    """Top ops by total time, each split by verdict (bar lengths 0..1 of the biggest)."""
    if not len(ops) or not ops["time_ns"].sum():
        return {"bars": [], "other_ms": 0.0, "other_ops": 0}
    by = ops.groupby(["op", "verdict"], sort=False)["time_ns"].sum().unstack(fill_value=0)
    for verdict in ("device", "fallback", "cpu"):
        if verdict not in by:
            by[verdict] = 0
    by["total"] = by[["device", "fallback", "cpu"]].sum(axis=1)
    by = by.sort_values("total", ascending=False, kind="stable")
    top = by.head(CHART_TOP_OPS)
    biggest = float(top["total"].iloc[0]) or 1.0
    bars = []
    for op, row in top.iterrows():
        bars.append({
            "op": str(op),
            "time_ms": float(row["total"]) / 1e6,
            "time": fmt_ms(float(row["total"]) / 1e6),
            "segments": [
                {"verdict": v, "length": float(row[v]) / biggest, "time_ms": float(row[v]) / 1e6}
                for v in ("device", "fallback", "cpu") if row[v] > 0
            ],
        })
    rest = by.iloc[CHART_TOP_OPS:]
    return {"bars": bars, "other_ms": float(rest["total"].sum()) / 1e6, "other_ops": int(len(rest))}


def _verdict_split(head: dict) -> dict:
    """Device / fallback / CPU shares of calls and of time (each list sums to 1 or is empty)."""
    calls = head["op_calls"]
    total_ms = head["time_ms"]

    def parts(values, whole):
        if not whole:
            return []
        return [{"verdict": v, "share": float(x) / whole, "text": fmt_share(float(x) / whole)}
                for v, x in values if x]

    return {
        "calls": parts([("device", head["device_calls"]), ("fallback", head["fallback_calls"]),
                        ("cpu", head["cpu_calls"])], calls),
        "time": parts([("device", head["device_op_time_ms"]), ("fallback", head["fallback_time_ms"]),
                       ("cpu", head["cpu_time_ms"])], total_ms),
    }


def _sweep(sweep) -> Optional[dict]:
    """The sweep chart's geometry (None without a sweep, or when its rows are unusable)."""
    if not isinstance(sweep, dict) or not sweep.get("rows"):
        return None
    from dmlprof.analysis.sweep import frame_to_rows, sweep_frame

    try:
        rows = frame_to_rows(sweep_frame(sweep["rows"]))
    except (KeyError, TypeError, ValueError):
        return None
    best_rate = max((r["samples_per_s"] for r in rows if r["status"] == "ok"), default=0.0) or 1.0
    memories = [r["peak_memory_bytes"] for r in rows if r["peak_memory_bytes"]]
    budget = sweep.get("memory_budget_bytes")
    budget = int(budget) if isinstance(budget, (int, float)) and not isinstance(budget, bool) and budget > 0 else None
    top_memory = max(memories + ([budget] if budget else []), default=0) or 1
    recommended, knee = sweep.get("recommended_batch_size"), sweep.get("knee_batch_size")
    out_rows = []
    for r in rows:
        ok = r["status"] == "ok"
        out_rows.append({
            **r,
            "rate_bar": r["samples_per_s"] / best_rate if ok else 0.0,
            "memory_bar": (r["peak_memory_bytes"] or 0) / top_memory,
            "rate": _rate(r["samples_per_s"]) if ok else "",
            "step_p50": fmt_ms(r["step_ms_p50"]) if ok else "",
            "step_p95": fmt_ms(r["step_ms_p95"]) if ok else "",
            "memory": fmt_bytes(r["peak_memory_bytes"]) if r["peak_memory_bytes"] else "?",
            "fallback": fmt_share(r["fallback_time_share"]) if ok else "",
            "recommended": r["batch_size"] == recommended,
            "knee": r["batch_size"] == knee,
        })
    return {
        "rows": out_rows,
        "recommended_batch_size": recommended,
        "knee_batch_size": knee,
        "memory_budget_bytes": budget,
        "budget_bar": budget / top_memory if budget else None,
        "budget": fmt_bytes(budget) if budget else "",
        "best_rate": best_rate,
        "best_rate_text": _rate(best_rate),
        "memory_top": fmt_bytes(top_memory) if memories or budget else "",
    }


def _replace(data) -> Optional[dict]:
    """``scan --replace``'s before/after comparison as table rows (None without one)."""
    if not isinstance(data, dict) or not isinstance(data.get("before"), dict) or not isinstance(data.get("after"), dict):
        return None
    before, after = data["before"], data["after"]

    def number(value, kind):
        if value is None:
            return "-"
        try:
            return {"int": f"{int(value):,}", "float": f"{float(value):,.1f}", "share": fmt_share(value),
                    "ms": fmt_ms(value)}[kind]
        except (TypeError, ValueError):
            return "-"

    rows = [
        {"label": label, "before": number(before.get(key), kind), "after": number(after.get(key), kind)}
        for label, key, kind in (("fallback calls", "fallback_calls", "int"),
                                 ("fallback calls per step", "fallback_calls_per_step", "float"),
                                 ("fallback time share", "fallback_time_share", "share"),
                                 ("step time (median)", "step_time_ms", "ms"))
    ]
    speedup = data.get("step_time_speedup")
    remaining = [
        {"op": str(r.get("op", "")), "calls": int(r.get("calls", 0) or 0), "replacement": r.get("replacement")}
        for r in data.get("remaining_ops") or [] if isinstance(r, dict)
    ]
    return {
        "rows": rows,
        "speedup": f"{float(speedup):.2f}x" if isinstance(speedup, (int, float)) and speedup else "",
        "applied": len(data.get("applied") or []),
        "removed_ops": [str(op) for op in data.get("removed_ops") or []],
        "remaining_ops": remaining,
    }


def _verify(data) -> Optional[dict]:
    """``scan --verify`` as display rows (None when the scan did not verify)."""
    from dmlprof.verify import summary

    found = summary(data)
    if found is None:
        return None

    def error(value):
        return "-" if value is None else f"{float(value):.3g}"

    found["divergent_ops"] = [
        dict(r, max_abs_error=error(r["max_abs_error"]), max_rel_error=error(r["max_rel_error"]),
             output_shape="x".join(str(n) for n in r["output_shape"]) or "-",
             input_shapes=", ".join("x".join(str(n) for n in shape) or "scalar" for shape in r["input_shapes"][:4]),
             input_dtypes=", ".join(sorted(set(r["input_dtypes"]))))
        for r in found["divergent_ops"]
    ]
    found["lost_updates"] = [dict(r, shape="x".join(str(n) for n in r["shape"]) or "scalar",
                                  max_abs_grad=error(r["max_abs_grad"])) for r in found["lost_updates"]]
    found["skipped"] = [dict(s, ops=", ".join(s["ops"][:6]) + (f" (+{len(s['ops']) - 6})" if len(s["ops"]) > 6 else ""))
                        for s in found["skipped"]]
    return found


def _rate(samples_per_s: float) -> str:
    return f"{samples_per_s:,.0f}" if samples_per_s >= 100 else f"{samples_per_s:,.2f}"


def _plain(values: dict) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in values.items()}


# -- markup --------------------------------------------------------------------
def script_json(value) -> str:
    """JSON safe to inline in a ``<script>`` element: no ``</script>``, ``<!--`` or ``]]>`` can form."""
    from dmlprof.session import _json_safe

    text = json.dumps(_json_safe(value), separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("dmlprof.render", "templates"),
        autoescape=True,  # every template, whatever its name: names from the model are hostile
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ms"] = fmt_ms
    env.filters["share"] = fmt_share
    env.filters["bytes"] = fmt_bytes
    env.filters["listing"] = fmt_list
    env.filters["pct"] = lambda share: f"{100 * max(0.0, min(1.0, float(share or 0))):.3f}"
    return env


#: rows any one table of the page holds (ranked tables keep their top rows); the JSON report keeps all.
#: A hostile 200,000-op session otherwise makes a page of tens of MB that a browser cannot open.
PAGE_ROWS = 2_000
#: names listed per hotspot (its modules, its source lines)
PAGE_NAMES = 50


def page_data(data: dict) -> dict:
    """``report_data`` cut to what a page can hold, with a flag saying what was left out (a new dict)."""
    data = dict(data)
    left_out = []

    def cut(rows: list, label: str, limit: int = PAGE_ROWS) -> list:
        if len(rows) > limit:
            left_out.append(f"{len(rows) - limit:,} of {len(rows):,} {label}")
            return rows[:limit]
        return rows

    data["ops"] = cut(data["ops"], "op rows (the least time first)")
    data["hotspots"] = [dict(h, modules=h["modules"][:PAGE_NAMES], sources=h["sources"][:PAGE_NAMES])
                        for h in cut(data["hotspots"], "fallback hotspots (the least time first)")]
    data["transfers"] = cut(data["transfers"], "copy and sync rows")
    data["warnings"] = cut(data["warnings"], "warnings", 50)
    modules = _top_modules(data["modules"], PAGE_ROWS)
    if len(modules) < len(data["modules"]):
        left_out.append(f"{len(data['modules']) - len(modules):,} of {len(data['modules']):,} modules "
                        "(the least time first)")
        data["modules"] = modules
    if data.get("sweep"):
        data["sweep"] = dict(data["sweep"], rows=cut(data["sweep"]["rows"], "sweep rows (the largest sizes)"))
    if data.get("verify"):
        data["verify"] = dict(data["verify"],
                              divergent_ops=cut(data["verify"]["divergent_ops"], "divergent ops"),
                              lost_updates=cut(data["verify"]["lost_updates"], "lost updates"))
    if left_out:
        data["flags"] = data["flags"] + [{"tone": "warn", "label": "Trimmed",
                                          "text": "This page leaves out " + "; ".join(left_out)
                                                  + ". The JSON report (--json) holds every row."}]
    return data


def _top_modules(rows: list, limit: int) -> list:
    """The ``limit`` modules with most time, with their ancestors so the tree stays whole, in tree order."""
    if len(rows) <= limit:
        return rows
    keep = {row["module"] for row in sorted(rows, key=lambda row: -row["time_ms"])[:limit]}
    for name in list(keep):
        while "." in name:
            name = name.rsplit(".", 1)[0]
            keep.add(name)
    kept = [row for row in rows if row["module"] in keep][: 2 * limit]  # deep chains: parents come first
    parents = {row["parent"] for row in kept}
    return [dict(row, has_children=row["module"] in parents) for row in kept]


def render_html(session) -> str:
    """The report as one self-contained HTML document (no network needed to open it)."""
    data = page_data(report_data(session))
    page = {key: data[key] for key in ("title", "data_version")}
    page["ops"] = data["ops"]
    page["op_fields"] = list(OP_ROW_FIELDS)
    # the module tree is drawn by the page script too: only the open rows become DOM
    page["modules"] = [[round(row[f], 6) if isinstance(row[f], float) else row[f] for f in MODULE_ROW_FIELDS]
                       for row in data["modules"]]
    page["module_fields"] = list(MODULE_ROW_FIELDS)
    template = _environment().get_template("report.html.j2")
    return template.render(data=data, page_json=script_json(page))
