"""The HTML report: one self-contained file (inline CSS, JS and data; opens offline).

Built in two steps, memray style: :func:`report_data` formats the Report
(:mod:`dmlprof.report`, everything computed once) as the page's plain data,
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
from statistics import median
from typing import Optional

from dmlprof.meta import PREDICTED, SCRIPT, SWEEP
from dmlprof.plain import plain
from dmlprof.render.format import fmt_bytes, fmt_list, fmt_ms, fmt_share
from dmlprof.report import report_of
from dmlprof.schema import CPU, DEVICE, FALLBACK, PHASES, VERDICTS

#: bump when report_data's shape changes (the page's script reads it)
DATA_VERSION = 1
#: ops drawn in the "time by op" chart
CHART_TOP_OPS = 15
#: module tree rows below this depth start collapsed when the tree is large
_TREE_OPEN_DEPTH = 2
_TREE_LARGE = 60


# -- data ----------------------------------------------------------------------
def report_data(source) -> dict:
    """Everything the HTML report shows, as plain JSON-able data, formatted from the Report.

    Keys: ``meta`` (run facts), ``flags`` (partial / predicted / cpu notes),
    ``cards`` (headline figures), ``summary`` (the report's summary), ``hotspots``
    (fallbacks ranked by time, each with its replacement or None),
    ``transfers``, ``ops`` (one row per op, verdict and phase: the sortable
    table), ``modules`` (the module tree), ``phases``, ``charts`` (bar
    geometry for the inline SVG charts), ``sweep`` (None without a sweep),
    ``replace`` and ``verify`` (``scan --verify``'s divergent ops and lost
    updates; None without one), ``verdicts`` and ``phase_names`` (the schema's
    vocabulary, for the page's script and filters).
    """
    report = report_of(source)
    timed = report.summary.time_ms > 0
    return {
        "data_version": DATA_VERSION,
        "title": report.title,
        "kind": report.kind,
        "is_sweep": report.kind == SWEEP,
        "cpu_is_device": report.cpu_is_device,
        "verdicts": list(VERDICTS),
        "phase_names": list(PHASES),
        "meta": _meta_facts(report),
        "flags": _flags(report, timed),
        "summary": plain(report.summary),
        "timed": timed,
        "cards": _cards(report, timed),
        "hotspots": [_hotspot(rank, h) for rank, h in enumerate(report.hotspots, start=1)],
        "transfers": [_transfer(r) for r in report.transfers],
        "ops": [_op_row(r) for r in report.ops],
        "modules": _module_rows(report.modules),
        "phases": _phase_rows(report.phases),
        "charts": {"time_by_op": _time_by_op_chart(report.time_by_op), "verdict_split": _verdict_split(report.summary)},
        "sweep": _sweep(report.sweep),
        "replace": _replace(report.replace),
        "verify": _verify(report.verification),
        "warnings": [{"category": w.category, "count": w.count, "message": (w.message.splitlines() or [""])[0][:300]}
                     for w in report.warnings],
    }


def _meta_facts(report) -> dict:
    run = report.run
    memory = run.memory
    return {
        "model": run.model or "",
        "model_name": run.model_name or "",
        "backend": run.device.backend or "",
        "device": run.device.device or "",
        "device_name": run.device.name or "",
        "torch_version": run.environment.torch_version or "",
        "dmlprof_version": run.environment.dmlprof_version or "",
        "python_version": run.environment.python_version or "",
        "platform": run.environment.platform or "",
        "backend_versions": dict(run.device.versions),
        "mode": report.kind,
        "run_mode": run.run_mode or "",
        "batch_size": run.batch_size,
        "warmup_steps": run.warmup_steps,
        "steps": run.steps,
        "optimizer": run.optimizer or "",
        "timing": run.recording.timing or "",
        "table_version": (run.prediction.table_version if run.prediction else None) or "",
        "started_at": run.started_at or "",
        "duration_s": run.duration_s,
        "step_time_ms_p50": float(median(run.step_times_ms)) if run.step_times_ms else None,
        "measured_steps": len(run.step_times_ms),
        "recording": run.recording.description or "",
        "profiler_check": _profiler_check(run.recording.profiler_check),
        "peak_memory_bytes": memory.peak_bytes if memory else None,
        "memory_source": (memory.source if memory else None) or "",
    }


def _profiler_check(check) -> str:
    """torch.profiler's totals next to ours for the ops both timed, as one line ('' when absent)."""
    if check is None or not check.matched_ops or None in (check.time_ms, check.profiler_time_ms, check.ratio):
        return ""
    return (f"{check.matched_ops} ops timed by both: dmlprof {fmt_ms(check.time_ms)}, "
            f"torch.profiler {fmt_ms(check.profiler_time_ms)} (ratio {check.ratio:.2f})")


def _flags(report, timed: bool) -> list:
    """Notes shown above everything else: what makes these numbers special."""
    run = report.run
    flags = []
    if run.partial:
        flags.append({"tone": "warn", "label": "Partial session",
                      "text": f"The run stopped early: {run.partial_reason or 'no reason recorded'}. "
                              "The figures cover only the steps that ran."})
    if report.kind == PREDICTED:
        table = (run.prediction.table_version if run.prediction else None) or "unknown table"
        times = ("Times were measured on the host that made the prediction, not on the device." if timed
                 else "A prediction has no per-call times, so shares by time are not shown.")
        flags.append({"tone": "info", "label": "Predicted",
                      "text": f"No device ran this: verdicts come from the op table {table}. {times}"})
    elif not timed and report.summary.op_calls:
        flags.append({"tone": "info", "label": "No timings", "text": "This session has no per-call times; shares by time are not shown."})
    if report.cpu_is_device and report.kind != SWEEP:
        flags.append({"tone": "info", "label": "CPU run",
                      "text": "The CPU was the device, so nothing can fall back. "
                              "Scan with --device (or predict with --target dml) to check an accelerator."})
    flags += [{"tone": "info", "label": "Note", "text": note} for note in run.notes]
    if not report.summary.op_calls and report.kind != SWEEP:  # a sweep holds its sizes, not op calls
        flags.append({"tone": "warn", "label": "Empty", "text": "No op calls were recorded."})
    return flags


def _cards(report, timed: bool) -> list:
    facts = _meta_facts(report)
    head = report.summary
    versions = ", ".join(f"{k} {v}" for k, v in facts["backend_versions"].items())
    device_detail = f"torch {facts['torch_version']}" + (f" \u00b7 {versions}" if versions else "")
    cards = [
        {"key": "device", "label": "Device", "value": facts["backend"] or "?",
         "detail": (facts["device_name"] + " \u00b7 " if facts["device_name"] else "") + device_detail, "tone": ""},
        {"key": "mode", "label": "Mode", "value": report.kind, "detail": _mode_detail(report),
         "tone": "info" if report.kind == PREDICTED else ""},
        {"key": "coverage_calls", "label": "On device, by calls", "value": fmt_share(head.device_call_share),
         "detail": f"{head.device_calls:,} of {head.op_calls:,} op calls",
         "tone": _coverage_tone(head.device_call_share, head.op_calls)},
        {"key": "coverage_time", "label": "On device, by time",
         "value": fmt_share(head.device_time_share) if timed else "n/a",
         "detail": f"{fmt_ms(head.device_op_time_ms)} of {fmt_ms(head.time_ms)} op time" if timed else "no per-call times",
         "tone": _coverage_tone(head.device_time_share, head.op_calls) if timed else ""},
        {"key": "fallback_time", "label": "Fallback time share",
         "value": fmt_share(head.fallback_time_share) if timed else "n/a",
         "detail": f"{head.fallback_calls:,} calls \u00b7 {head.distinct_fallback_ops} distinct ops"
                   + (f" \u00b7 {fmt_ms(head.fallback_time_ms)}" if timed else ""),
         "tone": "bad" if head.fallback_calls else "good"},
    ]
    if facts["step_time_ms_p50"] is not None:
        memory = facts["peak_memory_bytes"]
        cards.append({"key": "step_time", "label": "Step time (median)", "value": fmt_ms(facts["step_time_ms_p50"]),
                      "detail": f"{facts['measured_steps']} measured steps"
                                + (f" \u00b7 peak memory {fmt_bytes(memory)}" if memory else ""), "tone": ""})
    return cards


def _mode_detail(report) -> str:
    run = report.run
    if report.kind == PREDICTED:
        return f"op table {(run.prediction.table_version if run.prediction else None) or 'unknown'}"
    if report.kind == SWEEP:
        sweep = report.sweep
        return f"{len(sweep.rows) if sweep else 0} batch sizes"
    if run.run_mode == SCRIPT:
        return f"script mode \u00b7 {run.steps or 0} optimizer steps"
    return (f"batch {run.batch_size} \u00b7 {run.steps or 0} steps"
            + (f" \u00b7 {run.optimizer}" if run.optimizer else ""))


def _coverage_tone(share: float, calls: int) -> str:
    if not calls:
        return ""
    return "good" if share >= 0.99 else "warn" if share >= 0.9 else "bad"


def _hotspot(rank: int, h) -> dict:
    return {
        "rank": rank, "op": h.op, "inner_ops": list(h.inner_ops), "calls": h.calls, "inner_calls": h.inner_calls,
        "time_ms": h.time_ms, "time": fmt_ms(h.time_ms), "share": h.share, "share_text": fmt_share(h.share),
        "bytes_moved": h.bytes_moved, "moved": fmt_bytes(h.bytes_moved), "phases": list(h.phases),
        "modules": list(h.modules), "sources": list(h.sources), "replacement": h.replacement,
    }


def _transfer(r) -> dict:
    return {"op": r.op, "transfer": r.transfer, "calls": r.calls, "bytes_moved": r.bytes_moved,
            "moved": fmt_bytes(r.bytes_moved), "time_ms": r.time_ms, "time": fmt_ms(r.time_ms),
            "phases": list(r.phases), "sources": list(r.sources)}


def _op_row(r) -> list:
    """One row per (op, verdict, phase), as a compact array (``OP_ROW_FIELDS`` names the positions):
    a 100,000-call session is a few hundred rows."""
    return [r.op, r.verdict, r.phase, r.calls, round(r.time_ms, 6), round(r.share, 6), r.bytes_moved,
            ",".join(r.fallback_ops), r.module, r.source]


OP_ROW_FIELDS = ("op", "verdict", "phase", "calls", "time_ms", "share", "bytes_moved", "fallback_ops", "module", "source")
MODULE_ROW_FIELDS = ("module", "label", "depth", "parent", "calls", "time_ms", "device_share", "fallback_share",
                     "cpu_share", "fallback_calls", "fallback_time_ms", "open")


def _module_rows(modules) -> list:
    """The module tree, parents before children, with device/fallback/CPU shares of time."""
    names = {m.module for m in modules}
    parents = {m.parent for m in modules if m.parent in names}
    large = len(modules) > _TREE_LARGE
    return [{
        "module": m.module, "label": m.label, "depth": m.depth, "parent": m.parent, "has_children": m.module in parents,
        "calls": m.calls, "time_ms": m.time_ms, "time": fmt_ms(m.time_ms), "device_share": m.device_share,
        "fallback_share": m.fallback_share, "cpu_share": m.cpu_share, "fallback_calls": m.fallback_calls,
        "fallback_time_ms": m.fallback_time_ms, "open": not large or m.depth < _TREE_OPEN_DEPTH,
    } for m in modules]


def _phase_rows(phases) -> list:
    biggest = max((p.time_ms for p in phases), default=0.0)
    return [{
        "phase": p.phase, "calls": p.calls, "time_ms": p.time_ms, "time": fmt_ms(p.time_ms),
        "share": p.share, "share_text": fmt_share(p.share), "fallback_calls": p.fallback_calls,
        "fallback_time_ms": p.fallback_time_ms, "fallback_time": fmt_ms(p.fallback_time_ms), "cpu_calls": p.cpu_calls,
        # bar lengths relative to the biggest phase (0..1)
        "bar": p.time_ms / biggest if biggest else 0.0,
        "fallback_bar": p.fallback_time_ms / biggest if biggest else 0.0,
    } for p in phases]


def _time_by_op_chart(times) -> dict:
    """Top ops by total time, each split by verdict (bar lengths 0..1 of the biggest)."""
    if not times or not sum(t.time_ms for t in times):
        return {"bars": [], "other_ms": 0.0, "other_ops": 0}
    top, rest = times[:CHART_TOP_OPS], times[CHART_TOP_OPS:]
    biggest = top[0].time_ms or 1.0
    bars = [{"op": t.op, "time_ms": t.time_ms, "time": fmt_ms(t.time_ms),
             "segments": [{"verdict": v, "length": round(getattr(t, f"{v}_ms") / biggest, 6), "time_ms": getattr(t, f"{v}_ms")}
                          for v in VERDICTS if getattr(t, f"{v}_ms") > 0]} for t in top]
    return {"bars": bars, "other_ms": sum(t.time_ms for t in rest), "other_ops": len(rest)}


def _verdict_split(head) -> dict:
    """Device / fallback / CPU shares of calls and of time (each list sums to 1 or is empty)."""
    def parts(values, whole):
        if not whole:
            return []
        return [{"verdict": v, "share": float(x) / whole, "text": fmt_share(float(x) / whole)} for v, x in values if x]

    return {
        "calls": parts([(DEVICE, head.device_calls), (FALLBACK, head.fallback_calls), (CPU, head.cpu_calls)],
                       head.op_calls),
        "time": parts([(DEVICE, head.device_op_time_ms), (FALLBACK, head.fallback_time_ms), (CPU, head.cpu_time_ms)],
                      head.time_ms),
    }


def _sweep(sweep) -> Optional[dict]:
    """The sweep chart's geometry (None without a sweep)."""
    if sweep is None or not sweep.rows:
        return None
    best_rate = sweep.best_samples_per_s or 1.0
    memories = [r.peak_memory_bytes for r in sweep.rows if r.peak_memory_bytes]
    budget = sweep.memory_budget_bytes
    top_memory = max(memories + ([budget] if budget else []), default=0) or 1
    rows = [{
        **plain(r),
        "rate_bar": r.samples_per_s / best_rate if r.ok else 0.0,
        "memory_bar": (r.peak_memory_bytes or 0) / top_memory,
        "rate": _rate(r.samples_per_s) if r.ok else "",
        "step_p50": fmt_ms(r.step_ms_p50) if r.ok else "",
        "step_p95": fmt_ms(r.step_ms_p95) if r.ok else "",
        "memory": fmt_bytes(r.peak_memory_bytes) if r.peak_memory_bytes else "?",
        "fallback": fmt_share(r.fallback_time_share) if r.ok else "",
        "recommended": r.recommended,
        "knee": r.knee,
    } for r in sweep.rows]
    return {
        "rows": rows,
        "recommended_batch_size": sweep.recommended_batch_size,
        "knee_batch_size": sweep.knee_batch_size,
        "memory_budget_bytes": budget,
        "budget_bar": budget / top_memory if budget else None,
        "budget": fmt_bytes(budget) if budget else "",
        "best_rate": best_rate,
        "best_rate_text": _rate(best_rate),
        "memory_top": fmt_bytes(top_memory) if memories or budget else "",
    }


def _replace(data) -> Optional[dict]:
    """``scan --replace``'s before/after comparison as table rows (None without one)."""
    if data is None:
        return None

    def number(value, kind):
        if value is None:
            return "-"
        return {"int": f"{int(value):,}", "float": f"{float(value):,.1f}", "share": fmt_share(value),
                "ms": fmt_ms(value)}[kind]

    rows = [{"label": label, "before": number(getattr(data.before, key), kind),
             "after": number(getattr(data.after, key), kind)}
            for label, key, kind in (("fallback calls", "fallback_calls", "int"),
                                     ("fallback calls per step", "fallback_calls_per_step", "float"),
                                     ("fallback time share", "fallback_time_share", "share"),
                                     ("step time (median)", "step_time_ms", "ms"))]
    return {
        "rows": rows,
        "speedup": f"{data.step_time_speedup:.2f}x" if data.step_time_speedup else "",
        "applied": len(data.applied),
        "removed_ops": list(data.removed_ops),
        "remaining_ops": [{"op": r.op, "calls": r.calls, "replacement": r.replacement} for r in data.remaining_ops],
    }


def _verify(found) -> Optional[dict]:
    """``scan --verify`` as display rows (None when the scan did not verify)."""
    if found is None:
        return None

    def error(value):
        return "-" if value is None else f"{float(value):.3g}"

    data = plain(found)
    data["divergent_ops"] = [
        dict(plain(r), max_abs_error=error(r.max_abs_error), max_rel_error=error(r.max_rel_error),
             output_shape=_shape(r.output_shape) or "-",
             input_shapes=", ".join(_shape(shape) or "scalar" for shape in r.input_shapes[:4]),
             input_dtypes=", ".join(sorted(set(r.input_dtypes))))
        for r in found.divergent_ops
    ]
    data["lost_updates"] = [dict(plain(r), shape=_shape(r.shape) or "scalar", max_abs_grad=error(r.max_abs_grad))
                            for r in found.lost_updates]
    data["skipped"] = [dict(plain(s), ops=fmt_list(s.ops, 6)) for s in found.skipped]
    return data


def _shape(shape) -> str:
    return "x".join(str(n) for n in shape)


def _rate(samples_per_s: float) -> str:
    return f"{samples_per_s:,.0f}" if samples_per_s >= 100 else f"{samples_per_s:,.2f}"


# -- markup --------------------------------------------------------------------
def script_json(value) -> str:
    """JSON safe to inline in a ``<script>`` element: no ``</script>``, ``<!--`` or ``]]>`` can form."""
    text = json.dumps(plain(value), separators=(",", ":"), allow_nan=False, ensure_ascii=False)
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


def render_html(source) -> str:
    """The report of a Session or Report as one self-contained HTML document (no network needed to open it)."""
    data = report_data(source)
    page = {key: data[key] for key in ("title", "data_version")}
    page["ops"] = data["ops"]
    page["op_fields"] = list(OP_ROW_FIELDS)
    # the module tree is drawn by the page script too: only the open rows become DOM
    page["modules"] = [[round(row[f], 6) if isinstance(row[f], float) else row[f] for f in MODULE_ROW_FIELDS]
                       for row in data["modules"]]
    page["module_fields"] = list(MODULE_ROW_FIELDS)
    template = _environment().get_template("report.html.j2")
    return template.render(data=data, page_json=script_json(page))
