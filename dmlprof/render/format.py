"""Number formatting shared by the text renderers (one place for units)."""
from __future__ import annotations

from dmlprof.units import fmt_bytes  # noqa: F401  (one byte formatter for the whole house)


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


def fmt_list(values, limit: int = 2) -> str:
    values = list(values or [])
    if len(values) <= limit:
        return ", ".join(values)
    return ", ".join(values[:limit]) + f" (+{len(values) - limit})"
