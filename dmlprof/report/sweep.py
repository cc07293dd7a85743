"""A batch-size sweep as the report holds it (docs/sweep_schema.md): a row per size, and the sentences
every format gives it (the recommendation, the knee, the memory edge, a noisy size)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, Tuple


@dataclass(frozen=True)
class SweepRow:
    """One batch size: the schema's row (docs/sweep_schema.md) and what the report marks on it."""

    NOT_IN_JSON: ClassVar[tuple] = ("growth_per_doubling", "fits_budget", "noisy", "recommended", "knee")

    batch_size: int
    status: str  # ok, oom, error
    samples_per_s: float
    step_ms_p50: float
    step_ms_p95: float
    peak_memory_bytes: Optional[int]
    memory_source: str
    fallback_time_share: Optional[float]  # None where the backend cannot fall back (nothing recorded)
    error: Optional[str]
    growth_per_doubling: Optional[float]  # throughput change from the previous ok size, per doubling
    fits_budget: bool
    noisy: bool  # step p95 well over p50
    recommended: bool
    knee: bool

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class SweepReport:
    """A batch-size sweep: per-size rows, the recommendation, the knee, why it stopped."""

    NOT_IN_JSON: ClassVar[tuple] = ("knee_min_growth", "noisy_p95_over_p50", "fallback_ops", "fallback_recorded",
                                    "memory_sources")

    rows: Tuple[SweepRow, ...]
    recommended_batch_size: Optional[int]
    knee_batch_size: Optional[int]
    memory_budget_bytes: Optional[int]
    knee_min_growth: float
    noisy_p95_over_p50: float
    fallback_ops: Tuple[str, ...]  # ops that fell back in any size's recorded step
    fallback_recorded: Optional[bool]  # whether any size recorded a step for fallbacks (None: no size reported)
    memory_sources: Tuple[str, ...]

    @property
    def ok_rows(self) -> Tuple[SweepRow, ...]:
        return tuple(row for row in self.rows if row.ok)

    @property
    def best_samples_per_s(self) -> float:
        return max((row.samples_per_s for row in self.ok_rows), default=0.0)

    @property
    def noisy_note(self) -> Optional[str]:
        """When some size's steps varied widely, the sentence every format shows beside the recommendation."""
        noisy = [row.batch_size for row in self.ok_rows if row.noisy]
        if not noisy:
            return None
        return (f"noisy: step p95 over {self.noisy_p95_over_p50:g}x p50 at batch size"
                f"{'s' if len(noisy) > 1 else ''} {', '.join(map(str, noisy))} (other load on the machine, throttling, "
                "lazy initialisation); throughput uses the median, but rerun with more --steps to be sure")

    @property
    def recommended_row(self) -> Optional[SweepRow]:
        """The size the sweep recommends (None: none)."""
        return next((row for row in self.rows if row.recommended), None)

    @property
    def recommendation(self) -> str:
        """The recommended size and why, or why there is none: the sentence every format gives it."""
        best = self.recommended_row
        if best is not None:
            within = " within the memory budget" if self.memory_budget_bytes is not None else ""
            return (f"recommended batch size: {best.batch_size} ({best.samples_per_s:.1f} samples/s, "
                    f"the best throughput{within})")
        if not self.ok_rows:
            return "recommended batch size: none (no size ran to the end)"
        return ("recommended batch size: none (no size that ran fits in the memory budget; try smaller sizes or "
                "--memory-budget)")

    @property
    def knee_note(self) -> str:
        """Where throughput stops growing, or why no knee is named: the sentence every format gives it."""
        threshold = f"{100 * self.knee_min_growth:.0f}%"
        if self.knee_batch_size is not None:
            return (f"knee: {self.knee_batch_size} (past it, throughput grows less than {threshold} per doubling)"
                    + self._past_the_knee())
        if len(self.ok_rows) < 2:
            return "knee: unknown (fewer than two sizes ran)"
        return f"knee: not reached (throughput still grows {threshold} or more per doubling at the largest size)"

    def _past_the_knee(self) -> str:
        """Where the recommended size lies past the knee: how much faster it measured all the same, so the two
        sentences do not read as a contradiction (the knee is where growth slows, the recommendation the best)."""
        best = self.recommended_row
        knee = next((row for row in self.ok_rows if row.batch_size == self.knee_batch_size), None)
        if best is None or knee is None or best.batch_size <= knee.batch_size or not knee.samples_per_s:
            return ""
        gain = best.samples_per_s / knee.samples_per_s - 1
        return (f"; {best.batch_size} is recommended all the same: {gain:+.0%} samples/s over {knee.batch_size}, "
                "the best measured")

    @property
    def memory_edge_note(self) -> Optional[str]:
        """Where memory ran out and the largest size that fit below it, the sentence every format gives it
        (None: no size ran out of memory)."""
        edge = self.oom_batch_size
        if edge is None:
            return None
        largest = self.largest_ok_batch_size
        return (f"out of memory at batch size {edge}"
                + (f"; {largest} is the largest that fit" if largest is not None else "; no smaller size ran"))

    @property
    def oom_batch_size(self) -> Optional[int]:
        """The smallest size that ran out of memory: the sweep's memory edge (None: none did)."""
        return min((row.batch_size for row in self.rows if row.status == "oom"), default=None)

    @property
    def largest_ok_batch_size(self) -> Optional[int]:
        """The largest size that ran to the end below the memory edge (None: none did)."""
        edge = self.oom_batch_size
        return max((row.batch_size for row in self.ok_rows if edge is None or row.batch_size < edge), default=None)

    @property
    def largest_memory_bytes(self) -> Optional[int]:
        """The largest peak memory of any size, or the budget if higher (None: neither known)."""
        known = [row.peak_memory_bytes for row in self.rows if row.peak_memory_bytes]
        known += [self.memory_budget_bytes] if self.memory_budget_bytes else []
        return max(known, default=None)
