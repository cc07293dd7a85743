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
