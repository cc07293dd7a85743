"""Number formatting shared by the text renderers (one place for units)."""
from __future__ import annotations


def fmt_ms(ms) -> str:
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


def fmt_share(share) -> str:
    return "-" if share is None else f"{100 * float(share):.1f}%"


def fmt_bytes(count) -> str:
    count = float(count or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def fmt_list(values, limit: int = 2) -> str:
    values = list(values or [])
    if len(values) <= limit:
        return ", ".join(values)
    return ", ".join(values[:limit]) + f" (+{len(values) - limit})"
