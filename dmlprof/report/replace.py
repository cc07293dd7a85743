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
    def nothing_to_replace(self) -> bool:
        """No call fell back before patching (on the CPU none can): the replacements had nothing to remove, and a
        ratio of the two step times would credit them with a difference they did not make."""
        return not self.before.fallback_calls and not self.after.fallback_calls and not self.before.error

    def step_times(self) -> Tuple[str, str]:
        """The two median step times in one unit (seconds where either reaches one, else milliseconds), so the
        pair reads as a comparison; ``-`` for a side without one."""
        times = (self.before.step_time_ms, self.after.step_time_ms)
        in_seconds = any(t is not None and t >= 1000 for t in times)
        return tuple("-" if t is None else f"{t / 1000:.2f} s" if in_seconds else f"{t:.1f} ms" for t in times)

    @property
    def speed_change(self) -> Optional[str]:
        """Before / after as words, ``1.60x faster`` or ``2.28x slower`` (never a bare ``0.44x``); None without
        a step time on both sides, or with nothing to replace."""
        ratio = self.step_time_speedup
        if not ratio or self.nothing_to_replace:
            return None
        return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
