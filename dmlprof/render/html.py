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
from typing import Optional

from dmlprof.meta import SCRIPT, SWEEP, Memory, Prediction
from dmlprof.plain import plain
from dmlprof.units import fmt_ranks
from dmlprof.render.format import fmt_bytes, fmt_count, fmt_list, fmt_ms, fmt_rate, fmt_share, verdict_counts
from dmlprof.render.sweep_plots import sweep_plots
from dmlprof.report import is_merged_run, report_of
from dmlprof.report.model import SECTION_TITLES
from dmlprof.schema import PHASES, REPORT_VERDICTS

#: bump when report_data's shape changes (the page's script reads it)
DATA_VERSION = 2
#: ops drawn in the "time by op" chart
CHART_TOP_OPS = 15
#: module tree rows below this depth start collapsed when the tree is large
_TREE_OPEN_DEPTH = 2
_TREE_LARGE = 60


# -- data ----------------------------------------------------------------------
def report_data(source) -> dict:
    """Everything the HTML report shows, as plain JSON-able data, formatted from the Report.

    Keys: ``session_kind`` (scan, prediction, script, block, sweep, replace,
    verify), ``verdict`` (the first sentence, and its tone), ``meta`` (run
    facts), ``flags`` (partial / predicted / cpu notes), ``cards`` (headline figures), ``summary`` (the report's summary), ``hotspots``
    (fallbacks ranked by time, each with its replacement or None),
    ``transfers``, ``ops`` (one row per op, verdict and phase: the sortable
    table), ``modules`` (the module tree), ``phases``, ``charts`` (bar
    geometry for the inline SVG charts), ``sweep`` (None without a sweep),
    ``replace`` and ``verify`` (``scan --verify``'s divergent ops and lost
    updates; None without one), ``timeline`` (every timed call, for the page's
    timeline; None without times), ``verdicts`` and ``phase_names`` (the schema's
    vocabulary, for the page's script and filters).
    """
    report = report_of(source)
    if is_merged_run(report):
        return _run_data(report)
    timed = report.has_times
    data = {
        "data_version": DATA_VERSION,
        "title": report.title,
        "kind": report.kind,
        "session_kind": report.session_kind,
        "verdict": plain(report.verdict),
        "is_sweep": report.kind == SWEEP,
        "cpu_is_device": report.cpu_is_device,
        "verdicts": list(REPORT_VERDICTS),
        "phase_names": list(PHASES),
        "meta": _meta_facts(report),
        "flags": _flags(report),
        "summary": plain(report.summary),
        "timed": timed,
        "cards": _cards(report, timed),
        "hotspots": [_hotspot(rank, h, report.run.module_classes, timed)
                     for rank, h in enumerate(report.hotspots, start=1)],
        "transfers": [_transfer(r, timed) for r in report.transfers],
        "ops": [_op_row(r, timed) for r in report.ops],
        "modules": _module_rows(report.modules, timed),
        "phases": _phase_rows(report.phases, timed),
        "charts": {"time_by_op": _time_by_op_chart(report), "verdict_split": _verdict_split(report.verdict_split)},
        "sweep": _sweep(report.sweep),
        "replace": _replace(report.replace, report.host_cpu_times_note),
        "verify": _verify(report.verification),
        "timeline": _timeline(report.timeline, report.run.module_classes),
        "sections": _sections(report),
        "warnings": [{"category": w.category, "count": w.count, "message": (w.message.splitlines() or [""])[0][:300]}
                     for w in report.warnings],
    }
    return {**data, **_section_data(report, data)}


def _meta_facts(report) -> dict:
    """Run facts as the page prints them ('' for a fact not recorded)."""
    run = report.run
    memory = run.memory or Memory()
    texts = {"model": run.model, "model_name": run.model_name, "backend": run.device.backend,
             "device": run.device.device, "device_name": run.device.name,
             "torch_version": run.environment.torch_version, "dmlprof_version": run.environment.dmlprof_version,
             "python_version": run.environment.python_version, "platform": run.environment.platform,
             "run_mode": run.run_mode, "optimizer": run.optimizer, "timing": run.recording.timing,
             "table_version": _table_version(report), "started_at": run.started_at,
             "recording": run.recording.description, "memory_source": memory.source}
    return {
        **{key: value or "" for key, value in texts.items()},
        "backend_versions": dict(run.device.versions),
        "mode": report.kind,
        "session_kind": report.session_kind,
        "batch_size": run.batch_size,
        "warmup_steps": run.warmup_steps,
        "steps": run.steps,
        "duration_s": run.duration_s,
        "step_time_ms_p50": run.step_time_ms_p50,
        "measured_steps": len(run.step_times_ms),
        "profiler_check": _profiler_check(run.recording.profiler_check),
        "peak_memory_bytes": memory.peak_bytes,
    }


def _table_version(report) -> str:
    return (report.run.prediction or Prediction()).table_version or ""


def _profiler_check(check) -> str:
    """torch.profiler's totals next to ours for the ops both timed, as one line ('' when absent)."""
    if check is None or not check.matched_ops or None in (check.time_ms, check.profiler_time_ms, check.ratio):
        return ""
    return (f"{check.matched_ops} ops timed by both: dmlprof {fmt_ms(check.time_ms)}, "
            f"torch.profiler {fmt_ms(check.profiler_time_ms)} (ratio {check.ratio:.2f})")


#: the sections the page draws (a macro each in templates/sections.html.j2), by their titles in the contents bar
SECTION_NAMES = SECTION_TITLES
#: the page's own sections, drawn from the data it holds already (the run's facts: ``meta``)
_FROM_PAGE_DATA = ("run", "facts")


def _sections(report) -> list:
    """The report's sections (in its order) that the page draws."""
    return [name for name in report.sections if name in SECTION_NAMES]


def _section_data(report, data: dict) -> dict:
    """A section the page draws whose data report_data does not format: the report's field of that name."""
    return {name: plain(getattr(report, name)) for name in data["sections"]
            if name not in data and name not in _FROM_PAGE_DATA}


def _flags(report) -> list:
    """The notes the report leads with (composed once, on the report: report/notes.py), as the page's flags."""
    return [_flag(note.tone, note.label, note.text) for note in report.notes]


def _flag(tone: str, label: str, text: str) -> dict:
    return {"tone": tone, "label": label, "text": text}


def _card(key: str, label: str, value: str, detail: str, tone: str = "") -> dict:
    return {"key": key, "label": label, "value": value, "detail": detail, "tone": tone}


def _cards(report, timed: bool) -> list:
    """The headline figures, one card each."""
    if report.kind == SWEEP:
        return [_device_card(report)] + _sweep_cards(report.sweep)
    head = report.summary
    cards = [_device_card(report),
             _card("mode", "Session", report.session_kind, _mode_detail(report),
                   "info" if report.is_prediction else ""),
             _card("coverage_calls", "On device, by calls", fmt_share(head.device_call_share),
                   f"{head.device_calls:,} of {head.op_calls - head.host_bookkeeping_calls:,} op calls"
                   + (f" (and {head.host_bookkeeping_calls:,} host bookkeeping)" if head.host_bookkeeping_calls else ""),
                   report.device_call_tone)]
    cards += _time_cards(report) if timed else [
        _card("coverage_time", "On device, by time", "n/a", "no per-call times"),
        _card("fallback_time", "Fallback time share", "n/a",
              f"{head.fallback_calls:,} calls \u00b7 {head.distinct_fallback_ops} distinct ops",
              report.fallback_tone)]
    return cards + _step_card(report)


def _sweep_cards(sweep) -> list:
    """A sweep's headline: the size to use, the best throughput, the knee, the memory edge."""
    if sweep is None or not sweep.rows:
        return [_card("recommended", "Recommended batch size", "none", "no size was measured", "warn")]
    best = sweep.recommended_row
    recommended = (_card("recommended", "Recommended batch size", str(best.batch_size),
                         f"{fmt_rate(best.samples_per_s)} samples/s \u00b7 p95 {fmt_ms(best.step_ms_p95)}", "good")
                   if best else _card("recommended", "Recommended batch size", "none", "no size ran to the end", "warn"))
    rate = fmt_rate(sweep.best_samples_per_s) if sweep.ok_rows else "n/a"
    return [recommended,
            _card("best_rate", "Best throughput", rate,
                  f"samples/s over {len(sweep.ok_rows)} of {len(sweep.rows)} sizes that ran"),
            _knee_card(sweep.knee_batch_size), _oom_card(sweep)]


def _knee_card(knee: Optional[int]) -> dict:
    if knee is None:
        return _card("knee", "Knee", "none", "throughput still grew at the largest size that ran")
    return _card("knee", "Knee", str(knee), "throughput grows little past it")


def _oom_card(sweep) -> dict:
    edge = sweep.oom_batch_size
    if edge is None:
        return _card("oom", "Out of memory at", "none", "no size ran out of memory")
    return _card("oom", "Out of memory at", str(edge), f"largest size that fit: {sweep.largest_ok_batch_size}", "warn")


def _device_card(report) -> dict:
    device = report.run.device
    versions = ", ".join(f"{k} {v}" for k, v in device.versions.items())
    detail = f"torch {report.run.environment.torch_version or ''}" + (f" \u00b7 {versions}" if versions else "")
    name = device.name + " \u00b7 " if device.name else ""
    return _card("device", "Device", device.backend or "?", name + detail)


def _time_cards(report) -> list:
    head = report.summary
    return [
        _card("coverage_time", "On device, by time", fmt_share(head.device_time_share),
              f"{fmt_ms(head.device_op_time_ms)} of {fmt_ms(head.time_ms)} op time",
              report.device_time_tone),
        _card("fallback_time", "Fallback time share", fmt_share(head.fallback_time_share),
              f"{head.fallback_calls:,} calls \u00b7 {head.distinct_fallback_ops} distinct ops \u00b7 "
              f"{fmt_ms(head.fallback_time_ms)}", report.fallback_tone),
    ]


def _step_card(report) -> list:
    run = report.run
    if not run.step_times_ms:
        return []
    memory = (run.memory or Memory()).peak_bytes
    return [_card("step_time", "Step time (median)", fmt_ms(run.step_time_ms_p50),
                  fmt_count(len(run.step_times_ms), "measured step") + (f" \u00b7 peak memory {fmt_bytes(memory)}" if memory else ""))]


def _mode_detail(report) -> str:
    run = report.run
    if report.is_prediction:
        return f"op table {_table_version(report) or 'unknown'}"
    if run.run_mode == SCRIPT:
        return f"script mode \u00b7 {fmt_count(run.steps, 'optimizer step')}"
    return (f"batch {run.batch_size} \u00b7 {fmt_count(run.steps, 'step')}"
            + (f" \u00b7 {run.optimizer}" if run.optimizer else ""))


#: what a time or a share of time reads in a session that has none (a prediction): never "0.0 us"
NOT_TIMED = "n/a"


def _ms(value, timed: bool):
    return value if timed else None


def _ms_text(value, timed: bool) -> str:
    return fmt_ms(value) if timed else NOT_TIMED


def _share_text(value, timed: bool) -> str:
    return fmt_share(value) if timed else NOT_TIMED


def _hotspot(rank: int, h, classes, timed: bool) -> dict:
    return {
        "rank": rank, "op": h.op, "inner_ops": list(h.inner_ops), "calls": h.calls, "inner_calls": h.inner_calls,
        "time_ms": _ms(h.time_ms, timed), "time": _ms_text(h.time_ms, timed), "share": h.share if timed else 0.0,
        "share_text": _share_text(h.share, timed),
        "bytes_moved": h.bytes_moved, "moved": fmt_bytes(h.bytes_moved), "phases": list(h.phases),
        "modules": [_with_class(m, classes) for m in h.modules], "sources": list(h.sources),
        "replacement": h.replacement, "fixes": [{"op": f.op, "advice": f.advice} for f in h.fixes],
        "guessed": h.guessed, "torch_flag": h.torch_flag,
        "priced": h.priced if h.torch_flag is None else None,  # modelled on a real adapter (the notes say which)
    }


def _with_class(module: str, classes) -> str:
    """``Net.layer1.0 (BasicBlock)``: a module path with its class, where the recorder kept it."""
    name = classes.get(module)
    return f"{module} ({name})" if name and name != module.rsplit(".", 1)[-1] else module


def _transfer(r, timed: bool) -> dict:
    return {"op": r.op, "transfer": r.transfer, "calls": r.calls, "bytes_moved": r.bytes_moved,
            "moved": fmt_bytes(r.bytes_moved), "time_ms": _ms(r.time_ms, timed), "time": _ms_text(r.time_ms, timed),
            "phases": list(r.phases), "sources": list(r.sources)}


def _op_row(r, timed: bool) -> list:
    """One row per (op, verdict, phase), as a compact array (``OP_ROW_FIELDS`` names the positions):
    a 100,000-call session is a few hundred rows. Untimed (a prediction): time and share are null."""
    return [r.op, r.verdict, r.phase, r.calls, round(r.time_ms, 6) if timed else None,
            round(r.share, 6) if timed else None, r.bytes_moved,
            ",".join(r.fallback_ops), r.module, r.source]


OP_ROW_FIELDS = ("op", "verdict", "phase", "calls", "time_ms", "share", "bytes_moved", "fallback_ops", "module", "source")
MODULE_ROW_FIELDS = ("module", "label", "depth", "parent", "calls", "time_ms", "device_share", "fallback_share",
                     "cpu_share", "fallback_calls", "fallback_time_ms", "open")


def _module_rows(modules, timed: bool) -> list:
    """The module tree, parents before children, with device/fallback/CPU shares of time."""
    names = {m.module for m in modules}
    parents = {m.parent for m in modules if m.parent in names}
    large = len(modules) > _TREE_LARGE
    return [{
        "module": m.module, "label": m.label, "depth": m.depth, "parent": m.parent, "has_children": m.module in parents,
        "calls": m.calls, "time_ms": _ms(m.time_ms, timed), "time": _ms_text(m.time_ms, timed),
        "device_share": m.device_share,
        "fallback_share": m.fallback_share, "cpu_share": m.cpu_share, "fallback_calls": m.fallback_calls,
        "fallback_time_ms": m.fallback_time_ms, "open": not large or m.depth < _TREE_OPEN_DEPTH,
    } for m in modules]


def _phase_rows(phases, timed: bool) -> list:
    biggest = max((p.time_ms for p in phases), default=0.0)
    return [{
        "phase": p.phase, "calls": p.calls, "time_ms": _ms(p.time_ms, timed), "time": _ms_text(p.time_ms, timed),
        "share": p.share, "share_text": _share_text(p.share, timed), "fallback_calls": p.fallback_calls,
        "fallback_time_ms": _ms(p.fallback_time_ms, timed), "fallback_time": _ms_text(p.fallback_time_ms, timed),
        "cpu_calls": p.cpu_calls,
        # bar lengths relative to the biggest phase (0..1)
        "bar": p.time_ms / biggest if biggest else 0.0,
        "fallback_bar": p.fallback_time_ms / biggest if biggest else 0.0,
    } for p in phases]


def _time_by_op_chart(report) -> dict:
    """The report's top ops by time, each split by verdict; bar lengths 0..1 of the longest bar (the drawing's
    scale), and the rest as the report sums it."""
    top, other_ms, other_ops = report.top_ops_by_time(CHART_TOP_OPS)
    if not top:
        return {"bars": [], "other_ms": 0.0, "other_ops": 0}
    biggest = top[0].time_ms or 1.0
    bars = [{"op": t.op, "time_ms": t.time_ms, "time": fmt_ms(t.time_ms),
             "segments": [{"verdict": v, "length": round(getattr(t, f"{v}_ms") / biggest, 6), "time_ms": getattr(t, f"{v}_ms")}
                          for v in REPORT_VERDICTS if getattr(t, f"{v}_ms") > 0]} for t in top]
    return {"bars": bars, "other_ms": other_ms, "other_ops": other_ops}


def _verdict_split(split) -> dict:
    """The report's device / fallback / CPU shares of calls and of time, each with its text."""
    def parts(shares) -> list:
        return [{"verdict": part.verdict, "share": part.share, "text": fmt_share(part.share)} for part in shares]

    return {"calls": parts(split.calls), "time": parts(split.time)}


def _sweep(sweep) -> Optional[dict]:
    """The sweep's plots and table rows (None without a sweep)."""
    if sweep is None or not sweep.rows:
        return None
    return {
        "rows": [_sweep_row(r) for r in sweep.rows],
        "plots": sweep_plots(sweep),
        "noisy_note": sweep.noisy_note,
        # the report's sentences, as the terminal says them
        "lead": [sweep.recommendation, sweep.knee_note] + ([sweep.memory_edge_note] if sweep.memory_edge_note else []),
        "fallback_column": sweep.fallback_recorded is not False,  # the CPU cannot fall back: no such column
        "memory_budget_bytes": sweep.memory_budget_bytes,
    }


def _sweep_row(r) -> dict:
    """One batch size: the schema's row and its figures as text ('' unless it ran)."""
    texts = {"rate": fmt_rate(r.samples_per_s), "step_p50": fmt_ms(r.step_ms_p50), "step_p95": fmt_ms(r.step_ms_p95),
             "fallback": fmt_share(r.fallback_time_share)}
    return {
        **plain(r),
        **{key: text if r.ok else "" for key, text in texts.items()},
        "memory": fmt_bytes(r.peak_memory_bytes) if r.peak_memory_bytes else "?",
        "recommended": r.recommended,
        "knee": r.knee,
        "noisy": r.noisy,
    }


def _replace(data, times_note: Optional[str] = None) -> Optional[dict]:
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
    rows[-1]["before"], rows[-1]["after"] = data.step_times()  # one unit for the pair
    return {
        "rows": rows,
        "speedup": data.speed_change or "",
        "times_note": times_note if data.step_time_speedup else None,  # whose times the speed-up compares
        "applied": len(data.applied),
        "removed_ops": list(data.removed_ops),
        "remaining_ops": [{"op": r.op, "calls": r.calls, "replacement": r.replacement} for r in data.remaining_ops],
    }


def _timeline(line, classes) -> Optional[dict]:
    """The timeline as columns the page's script draws: names once each in ``names``, calls indexing them."""
    if line is None or not line.calls:
        return None
    names: dict = {}

    def index(values) -> list:
        return [names.setdefault(value, len(names)) for value in values]

    return {
        "lanes": list(line.lanes), "end_ns": line.end_ns,
        "start_ns": list(line.start_ns), "time_ns": list(line.time_ns), "lane": list(line.lane),
        "op": index(line.op), "module": index(_with_class(m, classes) for m in line.module),
        "source": index(line.source),
        "phase": index(line.phase), "step": list(line.step),
        "steps": [plain(span) for span in line.steps],
        "names": list(names),
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


# -- a launched job: every rank as one report ------------------------------------------------------
#: where a rank's step went, as the page's legend names each part (RunReport's StepPart.part)
STEP_PART_NAMES = {"compute": "compute", "fallback": "fallback", "cpu": "host calls", "host": "host bookkeeping",
                   "comm call": "collective calls",
                   "other": "other (Python, waiting for collectives)"}


def _run_data(report) -> dict:
    """A merged run (:class:`~dmlprof.report.run.RunReport`) as the page's data: the keys the page's frame reads
    (no op, module or timeline of one run), and ``run``, the rows its sections show."""
    about = report.meta
    texts = {"model": about.model, "backend": about.backend, "torch_version": about.torch_version,
             "dmlprof_version": about.dmlprof_version, "run_mode": about.run_mode, "timing": about.timing}
    return {
        "data_version": DATA_VERSION, "title": report.title, "kind": report.kind, "session_kind": report.session_kind,
        "verdict": plain(report.verdict), "is_sweep": False, "cpu_is_device": False,
        "verdicts": list(REPORT_VERDICTS), "phase_names": list(PHASES),
        "meta": {**{key: value or "" for key, value in texts.items()}, "device_name": "", "started_at": "",
                 "batch_size": about.batch_size},
        "flags": _flags(report),
        "summary": {}, "timed": True, "cards": _run_cards(report),
        "hotspots": [], "transfers": [], "ops": [], "modules": [], "phases": [], "charts": {}, "sweep": None,
        "replace": None, "verify": None, "timeline": None, "warnings": [],
        "sections": _sections(report), "run": _run_rows(report),
    }


def _run_cards(report) -> list:
    about, straggler = report.meta, report.straggler
    missing = f"missing: {fmt_ranks(report.missing_ranks)}" if report.missing_ranks else "every rank saved one"
    return [
        _card("device", "Device", about.backend or "?", f"process group {about.dist_backend or 'unknown'}"
              + (f" \u00b7 torch {about.torch_version}" if about.torch_version else "")),
        _card("ranks", "Ranks with a session", f"{len(report.ranks_found)} of {report.world_size}", missing,
              "bad" if report.missing_ranks else "good"),
        _card("straggler", "Straggler", "none" if straggler.rank is None else f"rank {straggler.rank}",
              "" if straggler.rank is None else f"busy {fmt_ms(straggler.busy_excess_ms)} longer per step",
              "" if straggler.rank is None else "warn"),
    ]


def _run_rows(report) -> dict:
    """Every table of the merged run, its figures as text (as the terminal shows them)."""
    return {
        "facts": [list(fact) for fact in report.facts],
        "step_parts": [{"part": key, "label": label} for key, label in STEP_PART_NAMES.items()],
        "ranks": [_rank_row(r) for r in report.ranks],
        "straggler": {"rank": report.straggler.rank, "sentence": report.straggler.sentence,
                      "ops": [{"op": o.op, "verdict": o.verdict, "rank": fmt_ms(o.rank_ms_per_step),
                               "others": fmt_ms(o.others_ms_per_step), "extra": fmt_ms(o.excess_ms_per_step)}
                              for o in report.straggler.ops]},
        "difference_ranks": sorted(report.verdict_differences[0].by_rank) if report.verdict_differences else [],
        "verdict_differences": [{"op": d.op, "by_rank": [verdict_counts(v) for _, v in sorted(d.by_rank.items())]}
                                for d in report.verdict_differences],
        "collectives": [{"rank": c.rank, "collective": c.collective, "op": c.op, "calls": c.calls,
                         "bytes": fmt_bytes(c.bytes), "in_call": fmt_ms(c.call_time_ms), "comm": fmt_ms(c.comm_time_ms)}
                        for c in report.collectives],
    }


def _rank_row(r) -> dict:
    times = {key: fmt_ms(getattr(r, key)) for key in ("step_ms", "compute_ms", "fallback_ms", "cpu_ms", "comm_ms",
                                                       "other_ms")}
    return {"rank": r.rank, "steps": "-" if r.steps is None else f"{r.steps:g}", **times,
            "comm_share": fmt_share(r.comm_share), "comm_calls": "-" if r.comm_calls is None else f"{r.comm_calls:g}",
            "comm_bytes": "-" if r.comm_bytes is None else fmt_bytes(r.comm_bytes), "status": r.status,
            "partial_reason": r.partial_reason,
            "bar": [{"part": p.part.replace(" ", "-"), "label": STEP_PART_NAMES[p.part], "share": p.share,
                     "text": fmt_share(p.share)} for p in r.step_parts]}


# -- markup --------------------------------------------------------------------
def script_json(value) -> str:
    """JSON safe to inline in a ``<script>`` element: no ``</script>``, ``<!--`` or ``]]>`` can form."""
    text = json.dumps(plain(value), separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def environment():
    """The Jinja2 environment of the report templates (the merged run report's too): autoescaping on for every
    template, and the unit filters; every document shares one head (``document_head.html.j2``: charset,
    Content-Security-Policy)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("dmlprof.render", "templates"),
        autoescape=True,  # every template, whatever its name: names from the model are hostile
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ms"] = lambda ms: NOT_TIMED if ms is None else fmt_ms(ms)
    env.filters["share"] = lambda share: NOT_TIMED if share is None else fmt_share(share)
    env.filters["bytes"] = fmt_bytes
    env.filters["listing"] = fmt_list
    env.filters["pct"] = lambda share: f"{100 * max(0.0, min(1.0, float(share or 0))):.3f}"
    return env


#: rows any one table of the page holds (ranked tables keep their top rows); the JSON report keeps all.
#: A hostile 200,000-op session otherwise makes a page of tens of MB that a browser cannot open.
PAGE_ROWS = 2_000
#: names listed per hotspot (its modules, its source lines)
PAGE_NAMES = 50
#: calls the page's timeline holds (about 40 bytes each in the page)
TIMELINE_CALLS = 100_000


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
    if data.get("timeline") and len(data["timeline"]["start_ns"]) > TIMELINE_CALLS:
        line = data["timeline"]
        left_out.append(f"{len(line['start_ns']) - TIMELINE_CALLS:,} of {len(line['start_ns']):,} timeline calls "
                        "(the last; dmlprof scan --trace FILE writes them all)")
        data["timeline"] = _first_calls(line, TIMELINE_CALLS)
    if left_out:
        data["flags"] = data["flags"] + [{"tone": "warn", "label": "Trimmed",
                                          "text": "This page leaves out " + "; ".join(left_out)
                                                  + ". The JSON report (--json) holds every row."}]
    return data


def _first_calls(line: dict, limit: int) -> dict:
    """The timeline cut to its first ``limit`` calls (in time order), and the steps they reach."""
    kept = {key: values[:limit] for key, values in line.items()
            if key in ("start_ns", "time_ns", "lane", "op", "module", "source", "phase", "step")}
    end_ns = max(s + t for s, t in zip(kept["start_ns"], kept["time_ns"]))
    return dict(line, **kept, end_ns=end_ns, steps=[span for span in line["steps"] if span["start_ns"] < end_ns])


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


def render_html(source) -> str:
    """The report of a Session, a Report or a RunReport as one self-contained HTML document (no network needed
    to open it)."""
    data = page_data(report_data(source))
    page = {key: data[key] for key in ("title", "data_version")}
    page["ops"] = data["ops"]
    page["op_fields"] = list(OP_ROW_FIELDS)
    # the module tree is drawn by the page script too: only the open rows become DOM
    page["modules"] = [[round(row[f], 6) if isinstance(row[f], float) else row[f] for f in MODULE_ROW_FIELDS]
                       for row in data["modules"]]
    page["module_fields"] = list(MODULE_ROW_FIELDS)
    page["timeline"] = data["timeline"]
    template = environment().get_template("report.html.j2")
    return template.render(data=data, page_json=script_json(page), section_names=SECTION_NAMES)
