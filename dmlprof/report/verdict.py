"""The verdict a report leads with: one sentence in the colour of what the run found.

Decided once, here, when the report is built (``Report.verdict``, and a merged
run's ``RunReport.verdict``): the HTML page, the notebook view and the JSON
report show it as it is, so that every format says the same first thing. Tones: ``bad`` (results are wrong), ``warn`` (the step works but
work left the device, or the run says less than it should), ``good`` (every
call ran where it should), ``info`` (nothing to judge: the CPU was the device).
"""
from __future__ import annotations

from dataclasses import dataclass

from dmlprof.units import fmt_bytes, fmt_ms, fmt_rate, fmt_share


#: work on the device at this share or more reads as good, at WARN_DEVICE_SHARE or more as a warning, below as bad
GOOD_DEVICE_SHARE, WARN_DEVICE_SHARE = 0.99, 0.9


def coverage_tone(share: float, calls: int) -> str:
    """The tone of a share of work on the device ('' when there were no calls to judge)."""
    if not calls:
        return ""
    return "good" if share >= GOOD_DEVICE_SHARE else "warn" if share >= WARN_DEVICE_SHARE else "bad"


@dataclass(frozen=True)
class Verdict:
    """The first sentence of a report, its tone, and what to read or do next."""

    tone: str  # bad, warn, good, info
    headline: str
    detail: str = ""


def verdict_of(report) -> Verdict:
    """What the first screen says about ``report``, most serious finding first."""
    if report.session_kind == "sweep":
        return _sweep_verdict(report.sweep)
    return _what_must_be_read_first(report) or _what_ran_where(report)


def _what_must_be_read_first(report):
    """A step that fails on the device, wrong results, a device the run never used; else None."""
    if report.device_failure_note:
        remedy = report.run.device_failure.remedy
        return Verdict("bad", report.device_failure_note, f"Fix: {remedy}" if remedy else "")
    broken = _training_broken(report)
    if broken is not None:
        return broken
    found = report.verification
    if found is not None and not found.clean:
        return Verdict("bad", "Wrong results: " + _wrong_results(found),
                       "The device computed values the CPU does not: fix these before trusting any figure below.")
    if report.device_unused_note:
        return Verdict("warn", report.device_unused_note, "The figures below describe calls on other devices.")
    return None


def _training_broken(report):
    """A known wrong result that loses gradients: training on DirectML is broken (else None)."""
    broken = [k for k in report.known_wrong_results if k.breaks_training]
    if not broken:
        return None
    return Verdict("bad", f"Training is broken on DirectML: {broken[0].consequence}.",
                   "Fix this before trusting any figure below: " + (broken[0].klass or broken[0].op) + ".")


def _what_ran_where(report) -> Verdict:
    head = report.summary
    if not head.op_calls:
        return Verdict("warn", "No op calls were recorded.", "Nothing ran under dmlprof: there is nothing to judge.")
    if report.replace is not None:
        return _replace_verdict(report)
    if report.cpu_is_device:
        return Verdict("info", "The CPU was the device, so nothing can fall back.",
                       "Scan with --device, or predict with --target dml, to check an accelerator.")
    checked = " Results match the CPU's." if report.verification is not None else ""
    return _fallback_verdict(report, checked)


def _wrong_results(found) -> str:
    parts = []
    if found.divergent_calls:
        ops = len({r.op for r in found.divergent_ops})
        parts.append(f"{found.divergent_calls:,} device op call{_s(found.divergent_calls)} ({ops} op{_s(ops)}) "
                     "gave results that differ from the CPU's")
    if found.lost_updates:
        count = len({r.parameter for r in found.lost_updates})
        parts.append(f"{count} parameter{_s(count)} never changed although {'its' if count == 1 else 'their'} "
                     "gradient was non-zero")
    return "; ".join(parts) + "."


def _fallback_verdict(report, checked: str) -> Verdict:
    head = report.summary
    predicted = report.is_prediction
    where = report.run.device.backend or "the device"
    if not head.fallback_calls:
        verb = "would run" if predicted else "ran"
        return Verdict("good", f"Every op call on device tensors {verb} on {where}.{checked}",
                       "Predicted from the op table: no device ran this." if predicted else "")
    verb = "would fall" if predicted else "fell"
    ops = head.distinct_fallback_ops
    headline = (f"{head.fallback_calls:,} op call{_s(head.fallback_calls)} ({ops} op{_s(ops)}) {verb} back to the CPU"
                + (f": {fmt_share(head.fallback_time_share)} of op time." if report.timed and head.time_ms else ".")
                + checked)
    return Verdict("warn", headline, _fallback_detail(report, predicted))


def _fallback_detail(report, predicted: bool) -> str:
    moved = report.summary.bytes_moved
    fixes = len(report.fixes)
    detail = f"{fmt_bytes(moved)} moved between host and device. " if moved and not predicted else ""
    return detail + (f"{fixes} known replacement{_s(fixes)} below (dmlprof scan --replace tries them)." if fixes
                     else "No known replacement yet: the hotspots below say where each call came from.")


def _replace_verdict(report) -> Verdict:
    data = report.replace
    before, after = data.before, data.after
    if data.nothing_to_replace:
        where = "the CPU was the device, so nothing can fall back" if report.cpu_is_device else \
            "no call fell back before patching"
        return Verdict("info", f"Nothing to replace: {where}.",
                       "Scan with --device emulated-dml --replace (or on DirectML) to see the replacements remove "
                       "fallbacks." if report.cpu_is_device else "The plain scan needs no replacement.")
    speed = ""
    if data.speed_change:
        shown_before, shown_after = data.step_times()
        speed = f" A step took {shown_before} before and {shown_after} after: {data.speed_change}."
        speed += _sentence(report.host_cpu_times_note)  # "1.89x slower" there is the host CPU's, not a GPU's
    if not after.fallback_calls:
        return Verdict("good", f"With dmlprof's replacements nothing falls back (before: {before.fallback_calls:,} "
                               f"fallback call{_s(before.fallback_calls)}).", speed.strip())
    return Verdict("warn", f"With dmlprof's replacements {after.fallback_calls:,} fallback call"
                           f"{_s(after.fallback_calls)} remain (before: {before.fallback_calls:,}).", speed.strip())


def _sweep_verdict(sweep) -> Verdict:
    if sweep is None or not sweep.ok_rows:
        return Verdict("warn", "No batch size ran to the end, so none is recommended.",
                       "The table below says how each size failed.")
    edge = (f" Out of memory from batch size {sweep.oom_batch_size}; the largest that fit is "
            f"{sweep.largest_ok_batch_size}." if sweep.oom_batch_size is not None else "")
    knee = (f" Throughput stops growing past {sweep.knee_batch_size} (the knee)."
            if sweep.knee_batch_size is not None else "")
    best = next((r for r in sweep.rows if r.recommended), None)
    if best is None:
        return Verdict("warn", "No batch size is recommended.", (edge + knee).strip())
    noisy = _sentence(sweep.noisy_note)
    # noisy steps make the ranking and the knee uncertain: the page says so as the terminal does, not in green
    return Verdict("warn" if noisy else "good",
                   f"Use batch size {best.batch_size}: {fmt_rate(best.samples_per_s)} samples/s, step p95 "
                   f"{fmt_ms(best.step_ms_p95)}.", (edge + knee + noisy).strip())


def _sentence(note) -> str:
    """`` Note as a sentence.`` after the text before it, or '' without a note."""
    return f" {note[0].upper()}{note[1:]}." if note else ""


def _s(count: int) -> str:
    return "" if count == 1 else "s"
