"""The terminal report: the Report formatted as plain ASCII text, one small function per section.

Each section takes the report and the row limit and returns its lines (none
when it has nothing to say): text, or tables not yet laid out
(:class:`~dmlprof.render.format.TableSpec`). Sections are separated by a blank
line. Only :func:`_join` knows the terminal's width: it wraps each line of
text and fits each table to it, so no line is wider than the terminal.
"""
from __future__ import annotations

from dmlprof.meta import BLOCK, SCRIPT, SWEEP, SweepRun
from dmlprof.tables.drift import BASELINE_TORCH
from dmlprof.render.format import (
    KEEP_END, KEEP_START, WRAP, TableSpec, clean, fmt_bytes, fmt_count, fmt_list, fmt_ms, fmt_share, terminal_width,
    verdict_counts, wrap_line,
)
from dmlprof.report import Report, is_merged_run, report_of


def render_text(source, top: int = 15, width=None) -> str:
    """The whole report of a Session, a Report or a RunReport (every rank of a job) as plain text (ASCII only,
    safe on any console), at most ``width`` columns wide (default: the terminal's, ``COLUMNS`` honoured)."""
    report = report_of(source)
    if report.kind == SWEEP:
        return render_sweep_text(report, width)
    header, formatters = (_run_header, _RUN_SECTIONS) if is_merged_run(report) else (_header, _SECTIONS)
    # the report says which sections it has, in which order; this table says how the terminal shows each
    return _join([header(report, top)] + [formatters[name](report, top) for name in report.sections if name in formatters],
                 width)


def render_sweep_text(source, width=None) -> str:
    """A batch-size sweep: the recommendation, the table per size, the knee and why it stopped."""
    report = report_of(source)
    sweep = report.sweep
    if sweep is None or not sweep.rows:
        return _join([_sweep_header(report), ["No batch size ran."] + _sweep_end(report)], width)
    return _join([_sweep_header(report), _sweep_verdicts(sweep), _sweep_table(sweep, report.cpu_is_device) + _sweep_notes(sweep),
                  _sweep_end(report)], width)


def _join(blocks, width=None) -> str:
    width = terminal_width(width)
    text = "\n\n".join("\n".join(_lay_out(line, width) for line in lines) for lines in blocks if lines)
    return _printable(text)


def _printable(text: str) -> str:
    """``text`` with every character a terminal would not print as itself shown as its code (``\\u202e``): a
    right-to-left override in a module's name could reorder what a report line reads. Names in other scripts
    (a module ``Modèle``) print as written; a console that cannot encode one shows "?" (the CLI's streams
    replace what they cannot encode)."""
    if text.isascii():
        return text
    return "".join(char if char == "\n" or char.isprintable() else f"\\u{ord(char):04x}" for char in text)


def _lay_out(line, width: int) -> str:
    # A table's cells are cleaned one by one; every other line is cleaned whole here: names come from
    # sessions people send each other, and may hold escape sequences or newlines.
    if isinstance(line, TableSpec):
        return line.render(width)
    if isinstance(line, _Rule):
        return line[:width]
    return "\n".join(wrap_line(clean(line), width))


def _if(condition: bool, *cells) -> list:
    """Table cells (or headers) that only belong when ``condition`` holds."""
    return list(cells) if condition else []


def _table(title: str, headers: list, rows: list, fit=None, details=(), **options) -> list:
    """A titled table; ``fit`` says how columns give way to a narrow terminal (header -> WRAP, KEEP_END...),
    ``details`` which columns move to a line under their row instead of being cut."""
    return [title, TableSpec(rows, headers, dict(fit or {}), options, tuple(details))]



# -- a scan -------------------------------------------------------------------------------------------
class _Rule(str):
    """A title's underline: cut to the width, never wrapped."""


def _title(title: str) -> list:
    return [title, _Rule("=" * len(title))]


def _header(report: Report, top: int) -> list:
    run = report.run
    facts = [("device", _device(report)), ("torch", run.environment.torch_version or ""), ("run", _run_line(report))]
    if not report.is_prediction:  # a prediction's note says where its verdicts and its times come from
        facts.append(("timing", run.recording.timing or ""))
    return _title(report.title) + [_facts(facts)] + _notes(report)


def _facts(facts: list) -> TableSpec:
    return TableSpec(facts, fit={1: WRAP}, options={"tablefmt": "plain"})


def _notes(report) -> list:
    """The notes the report leads with (composed on the report), under the run's facts: what needs reading
    first in capitals, as a console shows a warning."""
    notes = [(note.label.upper() if note.tone in ("bad", "warn") else note.label, note.text) for note in report.notes]
    return [_facts(notes)] if notes else []


def _device(report: Report) -> str:
    device = report.run.device
    return f"{device.backend or '?'} ({device.name})" if device.name else device.backend or "?"


def _run_line(report: Report) -> str:
    run = report.run
    if run.run_mode == SCRIPT:
        return _script_line(run)
    if run.run_mode == BLOCK:
        return f"dmlprof.profile() block ({fmt_count(run.steps, 'optimizer step')} seen)"
    return (f"model contract, batch size {run.batch_size}, {run.warmup_steps or 0} warm-up + "
            f"{fmt_count(run.steps, 'measured step')}, optimizer {run.optimizer or '?'}")


def _step_time(run) -> list:
    steps, recorded = run.step_times_ms, run.recorded_step_times_ms
    if not steps:
        return []
    if not recorded:
        return [f"step time: {fmt_ms(run.step_time_ms_p50)} median over {fmt_count(len(steps), 'measured step')}"]
    took = f"the recorded {'step' if len(recorded) == 1 else 'steps'} took {fmt_ms(run.recorded_step_time_ms_p50)}"
    # recorded steps no slower than the unrecorded ones show no cost of recording, only the steps' own variation
    why = ("recording's own cost" if (run.recorded_step_time_ms_p50 or 0) > (run.step_time_ms_p50 or 0)
           else "no slower: recording's cost is within the steps' own variation")
    return [f"step time: {fmt_ms(run.step_time_ms_p50)} median over {fmt_count(len(steps), 'unrecorded step')} "
            f"({took}: {why})"]


def _script_line(run) -> str:
    window = run.script_window
    if window is None:  # a session from before step windows: the whole run was recorded
        return f"script mode (recorded the whole run; {fmt_count(run.steps, 'optimizer step')} seen)"
    taken = window.optimizer_steps_taken or 0
    if not taken:  # no step to count from: everything the script did was recorded, a set-up or a whole script
        return f"script mode, no optimizer step taken: recorded from its start until it {'was stopped' if run.partial else 'ended'}"
    # the warm-up steps that ran, not those asked for: a script stopped at its first step ran none
    warmed = min(taken, window.warmup_steps or 0)
    return (f"script mode, {fmt_count(taken, 'optimizer step')} taken: {run.steps or 0} recorded after "
            f"{warmed} warm-up, {_script_end(run, window)}")


def _script_end(run, window) -> str:
    """How a script's run ended, after its recorded steps."""
    return ("it was stopped" if run.partial
            else "then stopped" if window.window_closed and not window.run_to_end
            else "then ran to its end unrecorded" if window.window_closed else "the script ended")


def _device_failure(report: Report, top: int) -> list:
    """What to do about the call that fails on the device (the failure itself is the report's first note)."""
    failed = report.run.device_failure
    return [f"fix for {failed.op}: {failed.remedy}"] if failed is not None and failed.remedy else []


def _headline(report: Report, top: int) -> list:
    s = report.summary
    lines = _if(report.replace is not None, "The patched run in detail:")
    bookkeeping = f", {s.host_bookkeeping_calls} host bookkeeping" if s.host_bookkeeping_calls else ""
    refused = f", {s.refused_calls} refused by the device" if s.refused_calls else ""
    lines += [f"{s.op_calls} op calls: {s.device_calls} on the device{refused}, "
              f"{s.fallback_calls} fell back to the CPU, {s.cpu_calls} on CPU tensors{bookkeeping}"]
    if report.has_times:
        lines.append(f"device share: {fmt_share(s.device_call_share)} of calls, {fmt_share(s.device_time_share)} of time; "
                     f"fallback: {fmt_ms(s.fallback_time_ms)} = {fmt_share(s.fallback_time_share)} of op time "
                     f"({fmt_ms(s.time_ms)} total)")
    else:  # no time is not 0 % of it (the page says n/a)
        why = "no times recorded" if report.timed else "predicted: no times"
        lines.append(f"device share: {fmt_share(s.device_call_share)} of calls ({why})")
    return lines + _step_time(report.run)


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
    rows = [[r.op, r.what, r.calls, f"{_error(r.max_abs_error)} / {_error(r.max_rel_error)}",
             f"{_shape(r.output_shape)} {r.output_dtype}", r.phase, r.module or "-", r.source or "-"] for r in shown]
    headers = ["op", "result", "calls", "max error abs / rel", "output", "phase", "module", "source"]
    fit = {"op": WRAP, "result": WRAP, "max error abs / rel": WRAP, "output": WRAP, "module": KEEP_END,
           "source": KEEP_END}
    return ([""] + _table("Ops whose device result differs from the CPU's (recomputed from the same inputs)", headers,
                          rows, fit)
            + [f"  {r.op} ({r.what}): {r.reason}" for r in shown if r.reason != "values differ beyond tolerance"])


def _lost_updates(shown) -> list:
    if not shown:
        return []
    rows = [[r.parameter, _shape(r.shape), r.dtype, r.optimizer, r.steps, _error(r.max_abs_grad)] for r in shown]
    return [""] + _table("Lost updates: parameters unchanged by optimizer.step() although their gradient was non-zero",
                         ["parameter", "shape", "dtype", "optimizer", "steps", "max |grad|"], rows,
                         {"parameter": KEEP_END, "shape": WRAP})


def _error(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def _shape(shape) -> str:
    return "x".join(str(n) for n in shape) or "-"


def _no_fallbacks(report: Report) -> str:
    """What "no fallback" means for this run, never more than it shows."""
    if report.cpu_is_device:
        return "Fallbacks: none possible (the CPU is the device: see the note above)."
    if report.device_unused_note:  # "every call on device tensors" would read as a pass: there were none
        return "Fallbacks: none possible - no call ran on the device (see above)."
    if report.summary.refused_calls:  # "every call ran" would hide the calls the device refused
        return (f"Fallbacks: none - every call on device tensors ran on the device but the "
                f"{report.summary.refused_calls} it refused.")
    if report.run.device_failure is not None:  # "every call ran" under the headline of a call that fails
        return "Fallbacks: none among the recorded calls - but the run fails on the device (see above)."
    return "Fallbacks: none - every call on device tensors ran on the device."


def _fallbacks(report: Report, top: int) -> list:
    """The fallback hotspots, each fix right under the table (what to change comes with what is wrong)."""
    hotspots = report.hotspots
    if not hotspots:
        return [_no_fallbacks(report)]
    rows = [[_hotspot_name(h), h.calls] + _if(report.timed, fmt_ms(h.time_ms), fmt_share(h.share))
            + [fmt_bytes(h.bytes_moved), fmt_list(h.modules, 1), fmt_list(h.sources, 1)] for h in hotspots[:top]]
    headers = ["op (-> what fell back)", "calls"] + _if(report.timed, "time", "share") + ["moved", "module", "source"]
    fit = {"op (-> what fell back)": WRAP, "module": KEEP_END, "source": KEEP_END}
    title = f"Fallback hotspots (top {min(top, len(hotspots))} of {len(hotspots)})"
    flagged = [f"  {TORCH_MARK} {h.torch_flag}" for h in hotspots[:top] if h.torch_flag]
    return (_table(title, headers, rows, fit, details=("module", "source")) + flagged + _fallback_costs(report)
            + [f"  fix {fix.op}: {fix.advice}" for fix in report.fixes])


def _fallback_costs(report: Report) -> list:
    """A DirectML stand-in's fallbacks priced on a real adapter class (modelled: the note says on which)."""
    costs = report.fallback_costs
    if costs is None:
        return []
    return [f"  {costs.headline}"] + [f"    {h.op}: {h.priced}" for h in report.hotspots
                                      if h.priced is not None and h.torch_flag is None]


#: marks a row whose calls came after a value the prediction made up, and a hotspot only this torch reaches
GUESS_MARK, TORCH_MARK = "[guess]", f"[not on torch {BASELINE_TORCH}]"


def _hotspot_name(hotspot) -> str:
    inner = ", ".join(hotspot.inner_ops)
    name = hotspot.op if inner in ("", hotspot.op) else f"{hotspot.op} -> {inner}"
    return " ".join([name] + _if(hotspot.guessed, GUESS_MARK) + _if(hotspot.torch_flag is not None, TORCH_MARK))


def _transfers(report: Report, top: int) -> list:
    if not report.transfers:
        return []
    rows = [[r.op, r.transfer, r.calls, fmt_bytes(r.bytes_moved)] + _if(report.timed, fmt_ms(r.time_ms))
            + [fmt_list(r.phases, 2), fmt_list(r.sources, 1)] for r in report.transfers[:top]]
    headers = ["op", "direction", "calls", "moved"] + _if(report.timed, "time") + ["phase", "source"]
    return _table("Host<->device copies and syncs", headers, rows, {"op": WRAP, "phase": WRAP, "source": KEEP_END})


def _host_calls_title(run) -> str:
    """The CPU-calls table's title: where a script's set-up was recorded with its steps (--warmup 0, or fewer
    steps taken than the warm-up asked), its parameter init before model.to(device) is in the table too, and
    the title says so rather than calling every row a call inside the step."""
    window = run.script_window if run.run_mode == "script" else None
    # the recording drops the set-up when the last warm-up step ends (dmlprof.record.window.StepWindow)
    if window is not None and (not window.warmup_steps or (window.optimizer_steps_taken or 0) < window.warmup_steps):
        return ("Calls on CPU tensors, the script's set-up before its first optimizer step included (their "
                "tensors were not on the device)")
    return "Calls on CPU tensors inside the step (their tensors were not on the device)"


def _host_calls(report: Report, top: int) -> list:
    if not report.host_calls:
        return []
    rows = [[r.op, r.calls] + _if(report.timed, fmt_ms(r.time_ms))
            + [fmt_list(r.phases, 2), fmt_list(r.modules, 1), fmt_list(r.sources, 1)] for r in report.host_calls[:top]]
    headers = ["op", "calls"] + _if(report.timed, "time") + ["phase", "module", "source"]
    return _table(_host_calls_title(report.run), headers, rows,
                  {"op": WRAP, "phase": WRAP, "module": KEEP_END, "source": KEEP_END},
                  # a module path or source line cut from the left loses where it is: whole, under its row
                  details=("module", "source"))


def _host_bookkeeping(report: Report, top: int) -> list:
    """One quiet line: calls on CPU scalars only (optimizer step counters) are not findings."""
    rows, s = report.host_bookkeeping, report.summary
    if not rows:
        return []
    ops = fmt_list(report.host_bookkeeping_ops, 3)
    spent = f", {fmt_ms(s.host_bookkeeping_time_ms)}" if report.timed else ""
    calls = fmt_count(s.host_bookkeeping_calls, "call")
    return [f"Host bookkeeping, not a finding: {calls} on CPU scalars only{spent} ({ops}), "
            "such as an optimizer's step counters; they move no data and no work off the device and are left "
            "out of the shares."]


def _ops(report: Report, top: int) -> list:
    timed = report.timed
    ops = report.ranked_ops
    with_device = any(r.device_time_ms is not None for r in ops)
    rows = [[" ".join([r.op] + _if(r.guessed, GUESS_MARK)), r.verdict, r.phase, r.calls] + _if(timed, fmt_ms(r.time_ms))
            + _if(with_device, fmt_ms(r.device_time_ms))
            + _if(timed, fmt_share(r.share)) for r in ops[:top]]
    headers = (["op", "verdict", "phase", "calls"] + _if(timed, "host time" if with_device else "time")
               + _if(with_device, "device time") + _if(timed, "share"))
    return _table(f"Ops by {'time' if timed else 'calls'} (top {min(top, len(ops))} of {len(ops)})", headers, rows,
                  {"op": WRAP})


def _phases(report: Report, top: int) -> list:
    timed = report.timed
    rows = [[r.phase, r.calls] + _if(timed, fmt_ms(r.time_ms), fmt_share(r.share)) + [r.fallback_calls]
            + _if(timed, fmt_ms(r.fallback_time_ms)) + [r.cpu_calls] for r in report.phases]
    headers = ["phase", "calls"] + _if(timed, "time", "share") + ["fallbacks"] + _if(timed, "fallback time") + ["cpu calls"]
    return _table("By phase", headers, rows)


def _replace(report: Report, top: int) -> list:
    """``scan --replace``, first: the same step before and after the replacements, counted as the plain scan counts."""
    data = report.replace
    if data is None:
        return []
    b, a = data.before, data.after
    applied = len(data.applied)
    lines = [f"Before and after dmlprof's replacements ({fmt_count(applied, 'change')}: "
             "dmlprof.patch(model, optimizer) + loss)"]
    if b.error:
        lines.append(f"  before: the unpatched step failed, so its numbers are up to the failure: {_first_line(b.error)}")
    shown_before, shown_after = data.step_times()
    rows = [
        ["calls that fell back", _fallen(b), _fallen(a)],
        ["calls that fell back per step", f"{b.fallback_calls_per_step:.1f}", f"{a.fallback_calls_per_step:.1f}"],
        ["fallback share of op time", f"{b.fallback_time_share:.1%}", f"{a.fallback_time_share:.1%}"],
        ["bytes fallbacks moved per step", fmt_bytes(b.fallback_bytes_moved_per_step),
         fmt_bytes(a.fallback_bytes_moved_per_step)],
        ["step time (median)", shown_before, shown_after],
    ]
    lines.append(TableSpec(rows, ["", "before", "after patching"], {"": WRAP},
                           {"colalign": ("left", "right", "right"), "disable_numparse": True}))
    if data.nothing_to_replace:
        return lines + ["  nothing to replace: nothing fell back before patching, so the replacements removed "
                        "nothing and the step times are not their effect"]
    if data.speed_change:  # none when a side has no step time
        lines.append(f"  step time: {data.speed_change} after patching")
    lines += _if(report.host_cpu_times_note is not None, f"  ({report.host_cpu_times_note})")
    lines += _if(bool(data.removed_ops), "  no longer falls back: " + ", ".join(data.removed_ops))
    lines += [f"  still falls back: {r.op} ({fmt_count(r.calls, 'call')}): {r.replacement or 'no replacement known'}"
              for r in data.remaining_ops]
    return lines + _if(not data.remaining_ops, "  after patching: no fallback calls")


def _first_line(text: str) -> str:
    """An error's first line whole (the terminal wraps it), never cut mid-sentence."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else "no message"


def _fallen(side) -> str:
    inner = side.inner_fallback_calls
    return f"{side.fallback_calls}" + (f" ({inner} inner)" if inner is not None and inner != side.fallback_calls else "")


def _step_ms(value) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _warnings(report: Report, top: int) -> list:
    if not report.warnings:
        return []
    return [f"Other warnings while recording ({len(report.warnings)} distinct):"] + [
        f"  {w.category} x{w.count}: {(w.message.splitlines() or [''])[0][:150]}" for w in report.warnings[:5]]


def _recording(report: Report, top: int) -> list:
    """How the run was recorded, where it was not call by call (after the findings: it qualifies them)."""
    if not report.run.recording.structure_step:
        return []
    return [_facts([("recording", "one structure step through the dispatcher; measured steps timed by "
                                  "torch.profiler")])]


#: the terminal's formatter of each section the report may have (report/model.py's SECTION_ORDER); the title,
#: the run's facts and the notes come first, always
_SECTIONS = {"device_failure": _device_failure, "replace": _replace, "charts": _headline, "verify": _verification,
             "hotspots": _fallbacks, "transfers": _transfers, "host_calls": _host_calls, "ops": _ops, "phases": _phases,
             "host_bookkeeping": _host_bookkeeping, "recording": _recording, "warnings": _warnings}


# -- a sweep ------------------------------------------------------------------------------------------
def _sweep_header(report: Report) -> list:
    sweep = report.run.sweep or SweepRun()
    settings = sweep.settings
    steps = "? timed steps" if settings.steps is None else fmt_count(settings.steps, "timed step")
    line = (f"{steps} after {_known(settings.warmup_steps)} warm-up, one process per size"
            + (f", autocast {settings.amp}" if settings.amp else ""))
    facts = [("device", _device(report)), ("torch", report.run.environment.torch_version or ""),
             ("run", line), ("memory budget", sweep.memory_budget or "-")]
    return _title(report.title) + [_facts(facts)] + _notes(report)


def _known(value) -> str:
    return "?" if value is None else str(value)


def _sweep_table(sweep, cpu_is_device: bool = False) -> list:
    """One row per batch size; no fallback column on the CPU, where nothing can fall back."""
    rows = [[row.batch_size, f"{row.samples_per_s:.1f}" if row.ok else "-", _growth(row),
             fmt_ms(row.step_ms_p50) if row.ok else "-", fmt_ms(row.step_ms_p95) if row.ok else "-",
             "-" if row.peak_memory_bytes is None else fmt_bytes(row.peak_memory_bytes)]
            + _if(not cpu_is_device, fmt_share(row.fallback_time_share) if row.ok else "-")
            + [" ".join([row.status] + _sweep_marks(row))]
            for row in sweep.rows]
    headers = (["batch", "samples/s", "per 2x", "step p50", "step p95", "peak memory"]
               + _if(not cpu_is_device, "fallback") + ["status"])
    return [TableSpec(rows, headers, {"status": WRAP, "peak memory": WRAP}, {"disable_numparse": True})]


def _growth(row) -> str:
    return "-" if row.growth_per_doubling is None else f"{100 * row.growth_per_doubling:+.0f}%"


def _sweep_marks(row) -> list:
    marks = _if(row.recommended, "<- recommended") + _if(row.knee, "<- knee")
    marks += _if(row.ok and not row.fits_budget, "over budget") + _if(row.noisy, "noisy")
    return marks + _if(not row.ok and bool(row.error), f"({_short(row.error or '')})")


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _sweep_notes(sweep) -> list:
    lines = _if(bool(sweep.memory_sources), f"peak memory: {', '.join(sweep.memory_sources)}")
    lines += _if(sweep.noisy_note is not None, sweep.noisy_note)
    if sweep.fallback_ops:
        lines.append(f"fell back to the CPU (one recorded step per size): {', '.join(sweep.fallback_ops)}")
    elif sweep.fallback_recorded is False:
        lines.append("fallback: not recorded (this backend cannot fall back to the CPU)")
    return lines


def _sweep_verdicts(sweep) -> list:
    return [sweep.recommendation, sweep.knee_note] + _if(sweep.memory_edge_note is not None, sweep.memory_edge_note)


def _sweep_end(report: Report) -> list:
    sweep = report.run.sweep
    if sweep is None:
        return []
    return _if(bool(sweep.stop_reason), f"stopped: {sweep.stop_reason}") + [f"note: {note}" for note in sweep.notes]


# -- a launched job: every rank as one report (RunReport) -----------------------------------------------
def _run_header(report, top: int) -> list:
    return _title(report.title) + [_facts(list(report.facts))] + _notes(report)


def _run_ranks(report, top: int) -> list:
    rows = [[r.rank, _run_number(r.steps), fmt_ms(r.step_ms), fmt_ms(r.compute_ms), fmt_ms(r.fallback_ms),
             fmt_ms(r.cpu_ms), fmt_ms(r.comm_ms), fmt_share(r.comm_share), fmt_ms(r.other_ms),
             _run_number(r.comm_calls), fmt_bytes(r.comm_bytes) if r.comm_bytes is not None else "-", r.status]
            for r in report.ranks]
    headers = ["rank", "steps", "step", "compute", "fallback", "host calls", "comm", "comm share", "other",
               "collectives", "bytes", "status"]
    # on a narrow terminal the collectives' figures leave the row for lines under it, whole
    return _table("Per rank (median step)", headers, rows, details=("comm share", "collectives", "bytes"))


def _run_number(value) -> str:
    return "-" if value is None else f"{value:g}"


def _run_straggler(report, top: int) -> list:
    straggler = report.straggler
    if not straggler.ops:
        return [straggler.sentence]
    rows = [[o.op, o.verdict, fmt_ms(o.rank_ms_per_step), fmt_ms(o.others_ms_per_step), fmt_ms(o.excess_ms_per_step)]
            for o in straggler.ops]
    return [straggler.sentence] + _table("", ["op", "verdict", f"rank {straggler.rank}/step", "others/step", "extra"],
                                         rows, {"op": WRAP})[1:]


def _run_differences(report, top: int) -> list:
    differences = report.verdict_differences
    if not differences:
        return ["Verdicts: every op has the same verdicts and calls per step on every rank."]
    rows = [[d.op] + [verdict_counts(v) for _, v in sorted(d.by_rank.items())] for d in differences[:top]]
    headers = ["op"] + [f"rank {r}" for r in sorted(differences[0].by_rank)]
    return _table(f"Ops whose verdict differs between ranks ({len(differences)}; calls per step)", headers, rows,
                  {header: WRAP for header in headers})


def _run_collectives(report, top: int) -> list:
    if not report.collectives:
        return []
    rows = [[c.rank, c.collective, c.op, c.calls, fmt_bytes(c.bytes), fmt_ms(c.call_time_ms), fmt_ms(c.comm_time_ms)]
            for c in report.collectives[: top * max(1, len(report.ranks))]]
    return _table("Collectives (all steps)", ["rank", "collective", "op", "calls", "bytes", "in the call", "collective"],
                  rows, {"collective": WRAP, "op": WRAP})


#: the terminal's formatter of each section of a merged run (report/run.py's RUN_SECTIONS; its facts lead, with the header)
_RUN_SECTIONS = {"ranks": _run_ranks, "straggler": _run_straggler, "verdict_differences": _run_differences,
                 "collectives": _run_collectives}
