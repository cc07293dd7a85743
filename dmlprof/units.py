"""Quantities in words, for every layer that speaks to the user (errors, options, reports)."""
from __future__ import annotations

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def fmt_bytes(count) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1 (``1.5 GiB``); ``None`` reads as 0."""
    value = float(count or 0)
    for unit in _BINARY_UNITS:
        if abs(value) < 1024 or unit == _BINARY_UNITS[-1]:
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable: the last unit always returns")


def fmt_ranks(ranks, limit: int = 12) -> str:
    """Rank numbers as runs, ``0, 2-7, 9``, at most ``limit`` runs shown (a forged run folder may claim millions)."""
    runs = []
    for rank in sorted(set(int(r) for r in ranks)):
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit])
    return text + (f" (+{len(runs) - limit} more runs)" if len(runs) > limit else "")


def fmt_count(count, noun: str, plural: str = "") -> str:
    """``1 step``, ``3 steps``: a count and its noun, singular for one (``plural`` where ``s`` is wrong)."""
    count = count or 0
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def fmt_ms(ms) -> str:
    """Milliseconds in the unit a reader takes in at a glance (``s``, ``ms``, ``us``); ``-`` when not measured."""
    try:
        ms = float(ms)
    except (TypeError, ValueError):  # None, pandas.NA: not measured
        return "-"
    if ms != ms:
        return "-"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 10:
        return f"{ms:.1f} ms"
    if ms >= 0.01:
        return f"{ms:.3f} ms"
    return f"{ms * 1000:.1f} us"


def fmt_rate(samples_per_s: float) -> str:
    """A throughput: whole numbers from 100 up, two decimals below."""
    return f"{samples_per_s:,.0f}" if samples_per_s >= 100 else f"{samples_per_s:,.2f}"


def fmt_share(share) -> str:
    """A share (0..1) as a percentage with one decimal; ``-`` when there is none."""
    return "-" if share is None else f"{100 * float(share):.1f}%"
