"""One short verdict per predicted target, for ``scan --target dml,xpu,mps`` (decided here, once).

"XPU, torch 2.14.1: 0 ops fall back (0 calls), fails at model.py:40 (aten::foo); set the target's fallback
variable to 1 (it then runs on the CPU), or replace aten::foo in the model". What to set or change is the device failure's remedy,
which the target's semantics (or DirectML's known errors) gave the session.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: targets whose users know them by another name than their flag's
_TITLES = {"dml": "DirectML"}


@dataclass(frozen=True)
class TargetVerdict:
    """A predicted step on one target, in one line."""

    target: str
    torch_version: str
    fallback_ops: int  # distinct ops sent to the CPU
    fallback_calls: int
    failed_op: Optional[str]
    failed_source: Optional[str]
    remedy: str
    line: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def title(target: str) -> str:
    return _TITLES.get(target, target.upper())


def device_and_torch(report) -> str:
    """The device a report is of and how it was had (``dml (scan)``); for a prediction, the torch whose
    registrations it read and, where the step ran on another, that one (``dml (predicted for torch 2.4.1 from
    a run on torch 2.13.0)``): what ``check`` names in its first line. The step's calls follow the torch it
    ran on (its decompositions), not the table's."""
    device = report.run.device.backend or "?"
    prediction = report.run.prediction
    if report.is_prediction and prediction is not None and prediction.table_torch_version:
        ran = (report.run.environment.torch_version or "").split("+")[0]
        table = prediction.table_torch_version
        on = f" from a run on torch {ran}" if ran and ran != table.split("+")[0] else ""
        return f"{device} (predicted for torch {table}{on})"
    return f"{device} ({report.kind})"


def target_verdict(report, raised: Optional[str] = None, refused=None, unpredicted=None) -> TargetVerdict:
    """The verdict of one predicted session's report (a :class:`~dmlprof.report.model.Report`); ``raised``: the
    one-line error of a step that raised for another reason than a call the device refuses (the model's own);
    ``refused``: the error (a :class:`~dmlprof.errors.DeviceError`) of a step the device refuses as a whole, no one
    call's failure (autocast on DirectML); ``unpredicted``: that (a :class:`~dmlprof.errors.NotPredicted`) of a step
    the prediction could not follow on the target."""
    run = report.run
    target = run.prediction.target if run.prediction is not None else ""
    version = (run.prediction.table_torch_version if run.prediction is not None else None) or "?"
    summary = report.summary
    failure = run.device_failure
    ops = summary.distinct_fallback_ops
    head = f"{title(target)}, torch {version}: {ops} op{'' if ops == 1 else 's'} fall{'s' if ops == 1 else ''} back"
    calls = summary.fallback_calls
    head += f" ({calls} call{'' if calls == 1 else 's'}{_named(report)})"
    if failure is None and unpredicted is not None:
        line = f"{head} before it stopped, not predicted: {unpredicted.one_line()}"
        return TargetVerdict(target, version, ops, summary.fallback_calls, None, None, "", line)
    if failure is None and refused is not None:
        line = f"{head}, fails: {refused.one_line()}"
        return TargetVerdict(target, version, ops, summary.fallback_calls, None, None, refused.remedy or "", line)
    if failure is None and raised is not None:  # not "no call fails": the step did not get through
        line = f"{head}, no call fails before the step raised: {raised}"
        return TargetVerdict(target, version, ops, summary.fallback_calls, None, None, "", line)
    if failure is None:
        line = head + ", no call fails" + ("" if not ops else "; its report has their fixes")
        return TargetVerdict(target, version, ops, summary.fallback_calls, None, None, "", line)
    where = f" at {failure.source}" if failure.source else ""
    remedy = failure.remedy or "see its report"
    line = f"{head}, fails{where} ({failure.op}); {remedy}"
    return TargetVerdict(target, version, ops, summary.fallback_calls, failure.op, failure.source or None, remedy,
                         line)


#: fallback ops a verdict line names before "..."
_NAMED_OPS = 3


def _named(report) -> str:
    """``: aten::a, aten::b`` for the ops sent to the CPU, most calls first (a composite's inner ops)."""
    names = []
    for hotspot in report.hotspots:
        for op in hotspot.inner_ops or (hotspot.op,):
            if op not in names:
                names.append(op)
    if not names:
        return ""
    return ": " + ", ".join(names[:_NAMED_OPS]) + (", ..." if len(names) > _NAMED_OPS else "")


__all__ = ["TargetVerdict", "cut_short_lines", "device_and_torch", "lines_block", "saved_note", "target_verdict",
           "title"]


def failed_before_the_step(target: str, error: str, predicted: bool = True) -> TargetVerdict:
    """The verdict of a target whose step failed before any call was recorded (the model's move to the device: a
    float64 model on MPS or DirectML), from the one-line error that stopped it; ``predicted=False``: the
    prediction could not follow the step there (no verdict)."""
    line = f"{title(target)}: " + (f"fails before the step; {error}" if predicted else f"not predicted; {error}")
    return TargetVerdict(target, "?", 0, 0, None, None, "", line)


#: what heads the per-target lines of a side-by-side run
LINES_HEADING = "predicted, not measured: one step on each target"


def lines_block(lines) -> str:
    """The per-target lines of a side-by-side run, under their heading."""
    return "\n".join([LINES_HEADING] + [f"  {line}" for line in lines])


def cut_short_lines(finished_lines, targets, running: str, how: str, kept: str, verdict: str = "cut short") -> list:
    """The per-target lines of a side-by-side run that a stop signal or the process's death (``how``: "stopped by
    SIGTERM", "the scanned process died of SIGSEGV at m.py:10 ...") ended in ``running``'s prediction: the finished
    targets' lines as they were, the running one's ``cut short`` with what of it was kept (``kept``: "its partial
    session saved", "nothing of it was saved"; ``verdict``: "crashed" for a death), and one line for each target after
    it, never predicted."""
    after = list(targets)[list(targets).index(running) + 1:]
    return (list(finished_lines) + [f"{title(running)}: {verdict}; {how} ({kept})"]
            + [f"{title(target)}: not predicted; the run ended before it" for target in after])


def saved_note(saved) -> str:
    """``dml session saved to X; mps partial session saved to Y``: what a cut-short side-by-side run kept
    (``saved``: (target, path, partial) triples), or "" for nothing."""
    return "; ".join(f"{target} {'partial ' if partial else ''}session saved to {path}"
                     for target, path, partial in saved)
