"""``scan --replace``: the run before and after dmlprof's replacements, compared (docs/replacements.md);
its speed change in words is said here once, for every renderer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple



@dataclass(frozen=True)
class ReplaceSide:
    """One run of ``--replace``'s comparison (before or after patching)."""

    steps: int
    fallback_calls: int  # calls that fell back, counted as the plain scan counts them (a composite once)
    fallback_calls_per_step: float
    fallback_time_share: float
    fallback_bytes_moved_per_step: float
    step_time_ms: Optional[float]
    fallback_ops: Mapping[str, int]
    error: Optional[str]  # the unpatched step failed: numbers up to the failure
    inner_fallback_calls: Optional[int] = None  # each inner call of a composite counted (None: an older session)


@dataclass(frozen=True)
class RemainingOp:
    op: str
    calls: int
    replacement: Optional[str]


@dataclass(frozen=True)
class ReplaceComparison:
    """``scan --replace``: the same step before and after dmlprof's replacements."""

    before: ReplaceSide
    after: ReplaceSide
    fallback_calls_removed: int
    step_time_speedup: Optional[float]
    removed_ops: Tuple[str, ...]
    remaining_ops: Tuple[RemainingOp, ...]
    applied: Tuple[Mapping[str, Any], ...]

    @property
    def speed_change(self) -> Optional[str]:
        """Before / after as words, ``1.60x faster`` or ``2.28x slower`` (never a bare ``0.44x``); None without
        a step time on both sides."""
        ratio = self.step_time_speedup
        if not ratio:
            return None
        return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
