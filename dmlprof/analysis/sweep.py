"""Batch-size sweep analysis: the knee of the throughput curve and a recommendation.

Pure functions over a *sweep frame*: one row per batch size with the columns
of :data:`SWEEP_COLUMNS` (the row schema of ``docs/sweep_schema.md``). No I/O.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional

import pandas as pd

SWEEP_COLUMNS = (
    "batch_size",
    "status",
    "samples_per_s",
    "step_ms_p50",
    "step_ms_p95",
    "peak_memory_bytes",
    "memory_source",
    "fallback_time_share",
    "error",
)
STATUSES = ("ok", "oom", "error")
#: throughput must grow at least this much per doubling of the batch size to be worth it
KNEE_MIN_GROWTH = 0.05


def failed_row(batch_size: int, error: Optional[str] = None) -> dict:
    """The row of a size that gave no measurement: status ``error``, zeros, memory unknown."""
    return {"batch_size": batch_size, "status": "error", "samples_per_s": 0.0, "step_ms_p50": 0.0, "step_ms_p95": 0.0,
            "peak_memory_bytes": None, "memory_source": "", "fallback_time_share": 0.0, "error": error}


def sweep_frame(rows: Iterable[dict]) -> pd.DataFrame:
    """Rows (dicts with the row schema) as a frame sorted by batch size.

    ``peak_memory_bytes`` is a nullable integer column (``pd.NA`` where the
    backend could not tell).
    """
    rows = list(rows)
    frame = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    frame["batch_size"] = frame["batch_size"].astype("int64")
    for column in ("samples_per_s", "step_ms_p50", "step_ms_p95", "fallback_time_share"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").fillna(0.0).astype("float64")
    frame["peak_memory_bytes"] = pd.array(
        [None if _missing(v) else int(v) for v in frame["peak_memory_bytes"]], dtype="Int64"
    )
    frame["memory_source"] = frame["memory_source"].map(lambda v: "" if _missing(v) else str(v))
    frame["error"] = frame["error"].map(lambda v: None if _missing(v) else str(v))
    return frame.sort_values("batch_size", kind="stable").reset_index(drop=True)


def _missing(value) -> bool:
    if value is None or value is pd.NA:
        return True
    try:
        return bool(isinstance(value, float) and math.isnan(value))
    except TypeError:
        return False


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Sizes that ran to the end with a positive throughput, smallest first."""
    good = frame[(frame["status"] == "ok") & (frame["samples_per_s"] > 0)]
    return good.sort_values("batch_size", kind="stable").reset_index(drop=True)


def growth_per_doubling(frame: pd.DataFrame) -> pd.DataFrame:
    """OK rows with ``growth_per_doubling``: the throughput change from the previous
    OK size, normalised to one doubling of the batch size (0.05 = +5 % per doubling).

    Normalising makes uneven steps (8 -> 24) comparable with doublings; the first
    row has no previous size and gets NaN.
    """
    good = ok_rows(frame).copy()
    growth = [math.nan]
    for previous, current in zip(good.itertuples(), list(good.itertuples())[1:]):
        growth.append(_per_doubling(previous.batch_size, previous.samples_per_s, current.batch_size, current.samples_per_s))
    good["growth_per_doubling"] = growth[: len(good)]
    return good


def _per_doubling(size_a: int, rate_a: float, size_b: int, rate_b: float) -> float:
    doublings = math.log2(size_b / size_a)
    if doublings <= 0 or rate_a <= 0:
        return math.nan
    return (rate_b / rate_a) ** (1.0 / doublings) - 1.0


def knee_batch_size(frame: pd.DataFrame, min_growth: float = KNEE_MIN_GROWTH) -> Optional[int]:
    """The first size past which throughput grows less than ``min_growth`` per doubling.

    A size is the knee when *every* larger OK size is less than ``min_growth``
    per doubling faster than it, so one noisy dip followed by real growth is
    not mistaken for the knee. ``None`` when throughput keeps growing up to the
    largest size measured, or when fewer than two sizes ran.
    """
    good = ok_rows(frame)
    sizes = good["batch_size"].tolist()
    rates = good["samples_per_s"].tolist()
    for i in range(len(sizes) - 1):
        later = [_per_doubling(sizes[i], rates[i], sizes[j], rates[j]) for j in range(i + 1, len(sizes))]
        if all(g < min_growth for g in later if not math.isnan(g)):
            return int(sizes[i])
    return None


def fits_budget(frame: pd.DataFrame, memory_budget_bytes: Optional[int]) -> pd.Series:
    """Per row: whether its peak memory is within the budget.

    With no budget every row fits; a row whose peak memory is unknown fits too
    (nothing says it does not), which the report states next to the budget.
    """
    if memory_budget_bytes is None:
        return pd.Series(True, index=frame.index)
    peak = frame["peak_memory_bytes"]
    return (peak.isna() | (peak <= int(memory_budget_bytes))).fillna(True).astype(bool)


def recommended_batch_size(frame: pd.DataFrame, memory_budget_bytes: Optional[int]) -> Optional[int]:
    """The OK size with the best throughput whose peak memory is within the budget.

    Ties go to the smaller size. ``None`` when no OK size fits.
    """
    fits = fits_budget(frame, memory_budget_bytes)
    candidates = frame[fits & (frame["status"] == "ok") & (frame["samples_per_s"] > 0)]
    if candidates.empty:
        return None
    best = candidates.sort_values(["samples_per_s", "batch_size"], ascending=[False, True], kind="stable")
    return int(best["batch_size"].iloc[0])


def sweep_summary(rows: Iterable[dict], memory_budget_bytes: Optional[int], min_growth: float = KNEE_MIN_GROWTH) -> dict:
    """The sweep as stored in ``Session.extras["sweep"]`` (docs/sweep_schema.md)."""
    frame = sweep_frame(rows)
    return {
        "rows": frame_to_rows(frame),
        "recommended_batch_size": recommended_batch_size(frame, memory_budget_bytes),
        "knee_batch_size": knee_batch_size(frame, min_growth),
        "memory_budget_bytes": None if memory_budget_bytes is None else int(memory_budget_bytes),
    }


def frame_to_rows(frame: pd.DataFrame) -> list:
    """A sweep frame back to plain rows with exactly the schema's keys and types."""
    rows = []
    for record in frame.to_dict(orient="records"):
        peak = record["peak_memory_bytes"]
        rows.append({
            "batch_size": int(record["batch_size"]),
            "status": str(record["status"]),
            "samples_per_s": float(record["samples_per_s"]),
            "step_ms_p50": float(record["step_ms_p50"]),
            "step_ms_p95": float(record["step_ms_p95"]),
            "peak_memory_bytes": None if _missing(peak) else int(peak),
            "memory_source": str(record["memory_source"] or ""),
            "fallback_time_share": float(record["fallback_time_share"]),
            "error": None if _missing(record["error"]) else str(record["error"]),
        })
    return rows
