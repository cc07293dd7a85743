"""The notes a report leads with: what makes its numbers special, each composed once (issue 35).

A note is a tone (``bad``, ``warn``, ``info``), a label and a sentence: a failing call, a device the
script never used, a known wrong result, a loss that diverged, a run cut short, a prediction's table and
its made-up values, a torch whose paths differ, what the run itself noted. Every format shows the same
notes (the terminal under the title, the page and the notebook as flags, the JSON report under
``notes``); none of them words a note again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from dmlprof.meta import SWEEP, Prediction

BAD, WARN, INFO = "bad", "warn", "info"


@dataclass(frozen=True)
class Note:
    """One note a report leads with: its tone, its label and its sentence."""

    tone: str
    label: str
    text: str


def lead_notes(report) -> Tuple[Note, ...]:
    """The notes of one run's Report, most serious first (failures and doubts, then how to read the numbers)."""
    scan = report.kind != SWEEP  # a sweep holds its sizes, not op calls
    notes = _warnings(report) + _timing(report)
    if report.cpu_is_device and scan:
        notes.append(Note(INFO, "CPU run", "The CPU was the device, so nothing can fall back. "
                                           "Scan with --device (or predict with --target dml) to check an accelerator."))
    notes += [Note(INFO, "Note", note) for note in report.run.notes] + _torch(report) + _guess(report)
    notes += _fallback_costs(report)
    if not report.summary.op_calls and scan:
        notes.append(Note(WARN, "Empty", "No op calls were recorded."))
    return tuple(notes)


def run_notes(errors) -> Tuple[Note, ...]:
    """A launched job's notes: each rank that failed, each rank file left out."""
    return tuple(Note(BAD, "Rank failed" if error.rank is not None else "Left out", error.text) for error in errors)


def _warnings(report) -> list:
    """What must be read first: a failing call, a device the script never used, wrong results, a loss that
    diverged, a run cut short."""
    notes = [Note(BAD, "Fails on the device", report.device_failure_note)] if report.device_failure_note else []
    notes += [Note(WARN, "Device not used", report.device_unused_note)] if report.device_unused_note else []
    notes += [Note(BAD if k.confirmed or k.breaks_training else WARN,
                   "Training is broken" if k.breaks_training else "May give wrong results" if k.unjudged
                   else "Known wrong results", _known_wrong(k))
              for k in report.known_wrong_results]
    loss = report.run.nonfinite_loss
    if loss:
        notes.append(Note(WARN, "Loss not finite", f"The loss was {loss.value} at training step {loss.step} of "
                                                   f"{loss.steps_run} (warm-up included): the training diverges."))
    if report.run.partial:
        notes.append(Note(WARN, "Partial session", f"The run stopped early: "
                                                   f"{report.run.partial_reason or 'no reason recorded'}. "
                                                   "The figures cover only the steps that ran."))
    return notes


def _known_wrong(known) -> str:
    where = f" at {known.sources[0]}" if known.sources else ""
    status = (f"confirmed: {known.confirmed_by}" if known.confirmed
              else "unconfirmed: seen on a software adapter only, not yet reported on a GPU")
    error = (f", max error {known.max_abs_error:.3g}" if known.max_abs_error is not None
             else f": {known.reason}" if known.reason else "")
    tail = (f" Class: {known.klass}." if known.klass else "") + (
        f" It breaks: {known.consequence}." if known.consequence else "") + (f" Fix: {known.fix}" if known.fix else "")
    if known.unjudged:
        return (f"{known.op} ({known.calls} calls{where}) may give wrong results on the real torch-directml: an "
                f"argument that decides it was not read ({status}).{tail}")
    if not known.measured_calls:
        return (f"{known.op} ({known.calls} calls{where}) gives wrong results on the real torch-directml{error} "
                f"({status}).{tail}")
    return (f"{known.op} ({known.calls} calls{where}) gave results that differ from the CPU's on the real "
            f"torch-directml in {known.measured_wrong_calls} of {known.measured_calls} measured calls{error} "
            f"({status}).{tail}")


def _timing(report) -> list:
    if report.is_prediction:
        times = ("Times were measured on the host that made the prediction, not on the device." if report.has_times
                 else "A prediction has no per-call times, so shares by time are not shown.")
        table = (report.run.prediction or Prediction()).table_version
        source = f"the op table {table}" if table else "an op table this session does not name"
        return [Note(INFO, "Predicted", f"No device ran this: verdicts come from {source}. {times}")]
    if not report.has_times and report.summary.op_calls:
        return [Note(INFO, "No timings", "This session has no per-call times; shares by time are not shown.")]
    return []


def _torch(report) -> list:
    paths = report.torch_paths
    if paths is None:
        return []
    differing = "; ".join(paths.differing_ops[:10])
    return [Note(INFO, "Torch", paths.note + (f". Differs: {differing}" if differing else ""))]


def _guess(report) -> list:
    guess = report.guess
    if guess is None:
        return []
    where = f" at {guess.source}" if guess.source else ""
    return [Note(WARN, "Guess", f"{guess.calls_after:,} of {guess.calls:,} calls came after a value the prediction "
                                f"made up ({guess.op}{where}: {guess.why}); their branches and shapes may differ "
                                "on the device. Hotspots marked 'guess' hold such calls.")]


def _fallback_costs(report) -> list:
    costs = report.fallback_costs
    if costs is None:
        return []
    unpriced = (f" Not counted: the device calls that replace {', '.join(costs.unpriced_ops)}." if costs.unpriced_ops
                else "")
    return [Note(INFO, "Fallback cost", (
        "What the fallbacks cost and what fixing them saves are modelled, not measured: copies to the host and back, "
        f"the syncs they force and a replacement's added device calls, priced on {costs.adapter} (measured "
        f"{costs.measured}); the CPU kernel's time is {costs.cpu_kernel}. Another adapter costs otherwise.{unpriced} "
        "Checked against that GPU: docs/prediction.md."))]
