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
