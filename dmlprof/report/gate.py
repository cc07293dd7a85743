"""``dmlprof check``'s verdict: a report's fallbacks held against the limits a CI job sets (pure, torch-free).

Two limits: the fallback share (of op time; of calls for a prediction, which
has no times) and how many different ops may fall back (the inner ops, the ones
the backend sent to the CPU). Host bookkeeping never counts: it is not a
finding (docs/report_schema.md, "Verdicts").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from dmlprof.report.model import Hotspot, Report


@dataclass(frozen=True)
class LimitCheck:
    """One limit against what the run measured."""

    name: str  # "fallback share", "fallback ops", "calls on the device"
    measured: float
    limit: float
    unit: str  # "share" (0..1), "ops" or "calls"
    #: the limit is a floor, not a ceiling (calls on the device: at least 1)
    floor: bool = False
    #: what a failure means, in words (shown after the figures when the check fails)
    why: str = ""
    #: how the measured figure is made up, in the scan's words (shown after it)
    parts: str = ""

    @property
    def passed(self) -> bool:
        return self.measured >= self.limit if self.floor else self.measured <= self.limit

    def describe(self) -> str:
        """``fallback share 5.8% of op time (limit 1.0%)`` and the like."""
        bound = ("at least " if self.floor else "") + self._text(self.limit)
        parts = f" = {self.parts}" if self.parts else ""
        return f"{self.name} {self._text(self.measured)}{parts} (limit {bound})" + (
            f": {self.why}" if self.why and not self.passed else "")

    def _text(self, value: float) -> str:
        return f"{100 * value:.1f}%" if self.unit == "share" else f"{int(value)}"


@dataclass(frozen=True)
class GateResult:
    """Every limit checked, and the hotspots behind them (slowest first)."""

    checks: Tuple[LimitCheck, ...]
    hotspots: Tuple[Hotspot, ...]
    report: Report

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def failed(self) -> Tuple[LimitCheck, ...]:
        return tuple(check for check in self.checks if not check.passed)


def check_limits(report: Report, max_fallback_share: Optional[float], max_fallback_ops: Optional[int],
                 count_torch_only: bool = False, allow_wrong_results: bool = False) -> GateResult:
    """The report held against the limits (a limit of None is not checked).

    Hotspots that only the torch the session ran on reaches (``torch_flag``: DirectML users' torch 2.4.1
    does not) are not the users' findings and are left out, unless ``count_torch_only``.
    """
    summary = report.summary
    share_name = "fallback share of op time" if report.timed else "fallback share of calls"
    share = summary.fallback_time_share if report.timed else summary.fallback_call_share
    hotspots = report.hotspots if count_torch_only else tuple(h for h in report.hotspots if h.torch_flag is None)
    ops = summary.distinct_fallback_ops
    left_out = [h for h in report.hotspots if h not in hotspots]
    if left_out:
        share -= sum(h.share for h in left_out) if report.timed else _call_share(left_out, summary)
        ops = len({op for h in hotspots for op in (h.inner_ops or (h.op,))})
    checks = [_device_used(report)]
    if max_fallback_share is not None:
        checks.append(LimitCheck(share_name, max(share, 0.0), max_fallback_share, "share"))
    if max_fallback_ops is not None:
        checks.append(LimitCheck("ops that fell back", ops, max_fallback_ops, "ops"))
    if any(not k.unjudged for k in report.known_wrong_results) and not allow_wrong_results:
        checks.append(_wrong_results(report))  # (a run with none has nothing to say here)
    return GateResult(tuple(checks), hotspots, report)


def _wrong_results(report: Report) -> LimitCheck:
    """Calls in a class whose results are wrong on DirectML: the step runs, and computes something else."""
    known = [k for k in report.known_wrong_results if not k.unjudged]  # (those that may be wrong: said, not counted)
    first = known[0] if known else None
    why = ((first.consequence or f"{first.op}: {first.reason or 'wrong results'}") +
           " (--allow-wrong-results lets them pass)") if first is not None else ""
    return LimitCheck("calls with known wrong results", sum(k.calls for k in known), 0, "calls", why=why)


def _device_used(report: Report) -> LimitCheck:
    """A run with no call on the device could not fall back at all: the gate would pass whatever the model
    does (a script that hard-codes "cpu", or one written for CUDA scanned without --from cuda)."""
    summary = report.summary
    on_device = summary.device_calls + summary.fallback_calls
    note = report.device_unused_note
    why = f"nothing was tested. {note}" if note else "nothing was tested: no call ran on the device, so none could fall back"
    # the scan counts these apart ("125 on the device, 9 fell back"): say how this figure adds them up
    parts = (f"{summary.device_calls:,} ran there + {summary.fallback_calls:,} fell back"
             if summary.device_calls and summary.fallback_calls else "")
    return LimitCheck("calls on the device", on_device, 1, "calls", floor=True, why=why, parts=parts)


def _call_share(hotspots, summary) -> float:
    """The hotspots' share of the calls the summary's fallback share counts (host bookkeeping left out)."""
    counted = summary.op_calls - summary.host_bookkeeping_calls
    return sum(h.calls for h in hotspots) / counted if counted else 0.0
