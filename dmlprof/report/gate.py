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

    name: str  # "fallback share", "fallback ops"
    measured: float
    limit: float
    unit: str  # "share" (0..1) or "ops"

    @property
    def passed(self) -> bool:
        return self.measured <= self.limit

    def describe(self) -> str:
        """``fallback share 5.8% of op time (limit 1.0%)`` and the like."""
        return f"{self.name} {self._text(self.measured)} (limit {self._text(self.limit)})"

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


def check_limits(report: Report, max_fallback_share: Optional[float], max_fallback_ops: Optional[int]) -> GateResult:
    """The report held against the limits (a limit of None is not checked)."""
    summary = report.summary
    share_name = "fallback share of op time" if report.timed else "fallback share of calls"
    share = summary.fallback_time_share if report.timed else summary.fallback_call_share
    checks = []
    if max_fallback_share is not None:
        checks.append(LimitCheck(share_name, share, max_fallback_share, "share"))
    if max_fallback_ops is not None:
        checks.append(LimitCheck("ops that fell back", summary.distinct_fallback_ops, max_fallback_ops, "ops"))
    return GateResult(tuple(checks), report.hotspots, report)
