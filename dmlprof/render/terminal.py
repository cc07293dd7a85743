"""The terminal report: the Report formatted as plain ASCII text, one small function per section.

Each section takes the report and the row limit and returns its lines (none
when it has nothing to say); sections are separated by a blank line.
"""
from __future__ import annotations

from dmlprof.meta import BLOCK, SCRIPT, SWEEP, SweepRun
from dmlprof.render.format import Table, clean, fmt_bytes, fmt_list, fmt_ms, fmt_share, table
from dmlprof.report import Report, report_of


def render_text(source, top: int = 15) -> str:
    """The whole report of a Session or Report as plain text (ASCII only, safe on any console)."""
    report = report_of(source)
    if report.kind == SWEEP:
        return render_sweep_text(report)
    return _join(section(report, top) for section in _SECTIONS)


def render_sweep_text(source) -> str:
    """A batch-size sweep: the table per size, the recommendation, the knee and why it stopped."""
    report = report_of(source)
    sweep = report.sweep
    if sweep is None or not sweep.rows:
        return _join([_sweep_header(report), ["No batch size ran."] + _sweep_end(report)])
    return _join([_sweep_header(report), _sweep_table(sweep) + _sweep_notes(sweep),
                  _sweep_verdicts(sweep) + _sweep_end(report)])


def _join(blocks) -> str:
    # Every line but a table's (whose cells were cleaned one by one) is cleaned whole here: names
    # come from sessions people send each other, and may hold escape sequences or newlines.
    text = "\n\n".join("\n".join(line if isinstance(line, Table) else clean(line) for line in lines)
                         for lines in blocks if lines)
    return text.encode("ascii", "replace").decode("ascii")


def _if(condition: bool, *cells) -> list:
    """Table cells (or headers) that only belong when ``condition`` holds."""
    return list(cells) if condition else []


def _table(title: str, headers: list, rows: list, **options) -> list:
    return [title, table(rows, headers=headers, **options)]


# -- a scan -------------------------------------------------------------------------------------------
def _header(report: Report, top: int) -> list:
    run = report.run
    facts = [("device", _device(report)), ("torch", run.environment.torch_version or ""),
             ("run", _run_line(report)), ("timing", run.recording.timing or "")]
    if run.prediction is not None and run.prediction.table_version:
        facts.append(("op table", run.prediction.table_version))
    if run.recording.structure_step:
        facts.append(("recording", "one structure step through the dispatcher; measured steps timed by torch.profiler"))
    facts += [("note", note) for note in run.notes]
    if run.partial:
        facts.append(("PARTIAL", f"stopped early: {run.partial_reason or ''}"))
    facts += _loss_fact(run.nonfinite_loss)
    return [report.title, "=" * len(report.title), table(facts, tablefmt="plain")]


def _loss_fact(loss) -> list:
    if not loss:
        return []
    return [("LOSS", f"{loss.get('value')} at training step {loss.get('step')} of {loss.get('steps_run')} "
                     "(warm-up included): the training diverges")]


def _device(report: Report) -> str:
    device = report.run.device
    return f"{device.backend or '?'} ({device.name})" if device.name else device.backend or "?"


def _run_line(report: Report) -> str:
    run = report.run
    if run.run_mode == SCRIPT:
        return _script_line(run)
    if run.run_mode == BLOCK:
        return f"dmlprof.profile() block ({run.steps or 0} optimizer steps seen)"
    return (f"model contract, batch size {run.batch_size}, {run.warmup_steps or 0} warm-up + "
            f"{run.steps or 0} measured steps, optimizer {run.optimizer or '?'}")


def _step_time(run) -> list:
    steps, recorded = run.step_times_ms, run.recorded_step_times_ms
    if not steps:
        return []
    if not recorded:
        return [f"step time: {fmt_ms(run.step_time_ms_p50)} median over {len(steps)} measured steps"]
    recorded_p50 = sorted(recorded)[len(recorded) // 2]
    return [f"step time: {fmt_ms(run.step_time_ms_p50)} median over {len(steps)} unrecorded steps "
            f"(the recorded steps took {fmt_ms(recorded_p50)}: recording's own cost)"]


def _script_line(run) -> str:
    window = run.script_window or {}
    if not window:  # a session from before step windows: the whole run was recorded
        return f"script mode (recorded the whole run; {run.steps or 0} optimizer steps seen)"
    taken = window.get("optimizer_steps_taken", 0)
    end = ("then stopped" if window.get("window_closed") and not window.get("run_to_end")
           else "then ran to its end unrecorded" if window.get("window_closed") else "the script ended")
    return (f"script mode, {taken} optimizer steps taken: {run.steps or 0} recorded after "
            f"{window.get('warmup_steps', 0)} warm-up, {end}")


def _headline(report: Report, top: int) -> list:
    s = report.summary
    lines = _if(report.device_unused_note is not None, report.device_unused_note)
    lines += [f"{s.op_calls} op calls: {s.device_calls} on the device, "
             f"{s.fallback_calls} fell back to the CPU, {s.cpu_calls} on CPU tensors"]
    if report.timed:
        lines.append(f"device share: {fmt_share(s.device_call_share)} of calls, {fmt_share(s.device_time_share)} of time; "
                     f"fallback: {fmt_ms(s.fallback_time_ms)} = {fmt_share(s.fallback_time_share)} of op time "
                     f"({fmt_ms(s.time_ms)} total)")
    else:
        lines.append(f"device share: {fmt_share(s.device_call_share)} of calls (predicted: no times)")
    lines += _step_time(report.run)
    return lines


def _verification(report: Report, top: int) -> list:
    """The --verify section: divergent ops, lost updates, what was not checked."""
    found = report.verification
    if found is None:
        return []
    lines = [found.headline] + [f"  note: {note}" for note in found.notes]
    lines += _divergent(found.divergent_ops[:top]) + _lost_updates(found.lost_updates[:max(top, 30)])
    if found.skipped:
        lines.append("  not checked: " + "; ".join(f"{s.reason}: {s.calls} calls ({fmt_list(s.ops, 3)})"
                                                   for s in found.skipped))
    return lines


def _divergent(shown) -> list:
    if not shown:
        return []
    rows = [[r.op, r.what, r.calls, _error(r.max_abs_error), _error(r.max_rel_error), _shape(r.output_shape),
             r.output_dtype, r.phase, r.module or "-", r.source or "-"] for r in shown]
    headers = ["op", "result", "calls", "max abs err", "max rel err", "shape", "dtype", "phase", "module", "source"]
    return ([""] + _table("Ops whose device result differs from the CPU's (recomputed from the same inputs)", headers, rows)
            + [f"  {r.op} ({r.what}): {r.reason}" for r in shown if r.reason != "values differ beyond tolerance"])


def _lost_updates(shown) -> list:
    if not shown:
        return []
    rows = [[r.parameter, _shape(r.shape), r.dtype, r.optimizer, r.steps, _error(r.max_abs_grad)] for r in shown]
    return [""] + _table("Lost updates: parameters unchanged by optimizer.step() although their gradient was non-zero",
                         ["parameter", "shape", "dtype", "optimizer", "steps", "max |grad|"], rows)


def _error(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def _shape(shape) -> str:
    return "x".join(str(n) for n in shape) or "-"


def _fallbacks(report: Report, top: int) -> list:
    hotspots = report.hotspots
    if not hotspots:
        if report.cpu_is_device:
            return ["Fallbacks: none possible (the CPU is the device). Use --device or --target dml to check an accelerator."]
        return ["Fallbacks: none - every call on device tensors ran on the device."]
    rows = [[_hotspot_name(h), h.calls] + _if(report.timed, fmt_ms(h.time_ms), fmt_share(h.share))
            + [fmt_bytes(h.bytes_moved), fmt_list(h.modules, 1), fmt_list(h.sources, 1)] for h in hotspots[:top]]
    headers = ["op (-> what fell back)", "calls"] + _if(report.timed, "time", "share") + ["moved", "module", "source"]
    return _table(f"Fallback hotspots (top {min(top, len(hotspots))} of {len(hotspots)})", headers, rows)


def _hotspot_name(hotspot) -> str:
    inner = ", ".join(hotspot.inner_ops)
    return hotspot.op if inner in ("", hotspot.op) else f"{hotspot.op} -> {inner}"


def _fixes(report: Report, top: int) -> list:
    return [f"  fix {fix.op}: {fix.advice}" for fix in report.fixes]


def _transfers(report: Report, top: int) -> list:
    if not report.transfers:
        return []
    rows = [[r.op, r.transfer, r.calls, fmt_bytes(r.bytes_moved)] + _if(report.timed, fmt_ms(r.time_ms))
            + [fmt_list(r.phases, 2), fmt_list(r.sources, 1)] for r in report.transfers[:top]]
    headers = ["op", "direction", "calls", "moved"] + _if(report.timed, "time") + ["phase", "source"]
    return _table("Host<->device copies and syncs", headers, rows)


def _host_calls(report: Report, top: int) -> list:
    if not report.host_calls:
        return []
    rows = [[r.op, r.calls] + _if(report.timed, fmt_ms(r.time_ms))
            + [fmt_list(r.phases, 2), fmt_list(r.modules, 1), fmt_list(r.sources, 1)] for r in report.host_calls[:top]]
    headers = ["op", "calls"] + _if(report.timed, "time") + ["phase", "module", "source"]
    return _table("Calls on CPU tensors inside the step (their tensors were not on the device)", headers, rows)


def _ops(report: Report, top: int) -> list:
    timed = report.timed
    ops = report.ops if timed else sorted(report.ops, key=lambda r: -r.calls)  # a prediction has calls, not times
    with_device = any(r.device_time_ms is not None for r in ops)
    rows = [[r.op, r.verdict, r.phase, r.calls] + _if(timed, fmt_ms(r.time_ms)) + _if(with_device, fmt_ms(r.device_time_ms))
            + _if(timed, fmt_share(r.share)) for r in ops[:top]]
    headers = (["op", "verdict", "phase", "calls"] + _if(timed, "host time" if with_device else "time")
               + _if(with_device, "device time") + _if(timed, "share"))
    return _table(f"Ops by {'time' if timed else 'calls'} (top {min(top, len(ops))} of {len(ops)})", headers, rows)


def _phases(report: Report, top: int) -> list:
    timed = report.timed
    rows = [[r.phase, r.calls] + _if(timed, fmt_ms(r.time_ms), fmt_share(r.share)) + [r.fallback_calls]
            + _if(timed, fmt_ms(r.fallback_time_ms)) + [r.cpu_calls] for r in report.phases]
    headers = ["phase", "calls"] + _if(timed, "time", "share") + ["fallbacks"] + _if(timed, "fallback time") + ["cpu calls"]
    return _table("By phase", headers, rows)


def _replace(report: Report, top: int) -> list:
    """``scan --replace``: the same step before and after the replacements."""
    data = report.replace
    if data is None:
        return []
    b, a = data.before, data.after
    lines = [f"With dmlprof's replacements ({len(data.applied)} changes: dmlprof.patch(model, optimizer) + loss)",
             f"  {'':24}{'before':>12}{'after':>12}"]
    if b.error:
        lines.append(f"  before: the unpatched step failed ({b.error[:160]}); numbers are up to the failure")
    lines += [
        f"  {'fallback calls':24}{b.fallback_calls:>12}{a.fallback_calls:>12}",
        f"  {'fallback calls per step':24}{b.fallback_calls_per_step:>12.1f}{a.fallback_calls_per_step:>12.1f}",
        f"  {'fallback time share':24}{b.fallback_time_share:>12.1%}{a.fallback_time_share:>12.1%}",
        f"  {'fallback bytes per step':24}{fmt_bytes(b.fallback_bytes_moved_per_step):>12}"
        f"{fmt_bytes(a.fallback_bytes_moved_per_step):>12}",
        f"  {'step time (median)':24}{_step_ms(b.step_time_ms):>12}{_step_ms(a.step_time_ms):>12}"
        + (f"   ({data.step_time_speedup:.2f}x)" if data.step_time_speedup else ""),
    ]
    if data.removed_ops:
        lines.append("  removed: " + ", ".join(data.removed_ops))
    lines += [f"  still falls back: {r.op} ({r.calls} calls): {r.replacement or 'no replacement known'}"
              for r in data.remaining_ops]
    return lines + _if(not data.remaining_ops, "  after patching: no fallback calls")


def _step_ms(value) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _warnings(report: Report, top: int) -> list:
    if not report.warnings:
        return []
    return [f"Other warnings while recording ({len(report.warnings)} distinct):"] + [
        f"  {w.category} x{w.count}: {(w.message.splitlines() or [''])[0][:150]}" for w in report.warnings[:5]]


def _torch_paths(report: Report, top: int) -> list:
    paths = report.torch_paths
    if paths is None:
        return []
    lines = [f"Torch: {paths.note}"]
    lines += [f"  differs: {line}" for line in paths.differing_ops[:top]]
    return lines


_SECTIONS = (_header, _headline, _verification, _fallbacks, _fixes, _transfers, _host_calls, _ops, _phases, _replace,
             _torch_paths, _warnings)


# -- a sweep ------------------------------------------------------------------------------------------
def _sweep_header(report: Report) -> list:
    sweep = report.run.sweep or SweepRun()
    settings = sweep.settings
    line = (f"{_known(settings.steps)} timed steps after {_known(settings.warmup_steps)} warm-up, one process per size"
            + (f", autocast {settings.amp}" if settings.amp else ""))
    facts = [("device", _device(report)), ("torch", report.run.environment.torch_version or ""),
             ("run", line), ("memory budget", sweep.memory_budget or "-")]
    return [report.title, "=" * len(report.title), table(facts, tablefmt="plain")]


def _known(value) -> str:
    return "?" if value is None else str(value)


def _sweep_table(sweep) -> list:
    rows = [[row.batch_size, row.status, f"{row.samples_per_s:.1f}" if row.ok else "-", _growth(row),
             fmt_ms(row.step_ms_p50) if row.ok else "-", fmt_ms(row.step_ms_p95) if row.ok else "-",
             "-" if row.peak_memory_bytes is None else fmt_bytes(row.peak_memory_bytes),
             fmt_share(row.fallback_time_share) if row.ok else "-", "; ".join(_sweep_marks(row))] for row in sweep.rows]
    headers = ["batch", "status", "samples/s", "per 2x", "step p50", "step p95", "peak memory", "fallback", ""]
    return [table(rows, headers=headers, disable_numparse=True)]


def _growth(row) -> str:
    return "-" if row.growth_per_doubling is None else f"{100 * row.growth_per_doubling:+.0f}%"


def _sweep_marks(row) -> list:
    marks = _if(row.recommended, "<- recommended") + _if(row.knee, "knee")
    marks += _if(row.ok and not row.fits_budget, "over budget") + _if(row.noisy, "noisy")
    return marks + _if(not row.ok and bool(row.error), _short(row.error or ""))


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _sweep_notes(sweep) -> list:
    lines = _if(bool(sweep.memory_sources), f"peak memory: {', '.join(sweep.memory_sources)}")
    if any(row.noisy for row in sweep.rows):
        lines.append(f"noisy: step p95 over {sweep.noisy_p95_over_p50:g}x p50 (other load on the machine, throttling, "
                     "lazy initialisation); throughput uses the median, but rerun with more --steps to be sure")
    if sweep.fallback_ops:
        lines.append(f"fell back to the CPU (one recorded step per size): {', '.join(sweep.fallback_ops)}")
    elif sweep.fallback_recorded is False:
        lines.append("fallback: not recorded (this backend cannot fall back to the CPU)")
    return lines


def _sweep_verdicts(sweep) -> list:
    return [_recommendation_line(sweep), _knee_line(sweep)]


def _recommendation_line(sweep) -> str:
    best = next((row for row in sweep.rows if row.recommended), None)
    if best is not None:
        within = " within the memory budget" if sweep.memory_budget_bytes is not None else ""
        return (f"recommended batch size: {best.batch_size} ({best.samples_per_s:.1f} samples/s, "
                f"the best throughput{within})")
    if not sweep.ok_rows:
        return "recommended batch size: none (no size ran to the end)"
    return "recommended batch size: none (no size that ran fits in the memory budget; try smaller sizes or --memory-budget)"


def _knee_line(sweep) -> str:
    threshold = f"{100 * sweep.knee_min_growth:.0f}%"
    if sweep.knee_batch_size is not None:
        return f"knee: {sweep.knee_batch_size} (past it, throughput grows less than {threshold} per doubling)"
    if len(sweep.ok_rows) < 2:
        return "knee: unknown (fewer than two sizes ran)"
    return f"knee: not reached (throughput still grows {threshold} or more per doubling at the largest size)"


def _sweep_end(report: Report) -> list:
    sweep = report.run.sweep
    if sweep is None:
        return []
    return _if(bool(sweep.stop_reason), f"stopped: {sweep.stop_reason}") + [f"note: {note}" for note in sweep.notes]
