"""Formatting shared by the text renderers: one place for units, and for what may reach a terminal."""
from __future__ import annotations

import re

from dmlprof.units import fmt_bytes  # noqa: F401  (one byte formatter for the whole house)

# C0 controls (ESC, CR, LF, BS...), DEL and C1 controls (0x9b is a one-byte CSI on some terminals)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(value) -> str:
    """``value`` as text safe to print: control characters shown as ``\\xNN``.

    Op, module and source names come from sessions people send each other; raw,
    an escape sequence could retitle or recolour the terminal and a newline
    could forge a report line. Every name a text report prints goes through here.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value if isinstance(value, str) else str(value))


class Table(str):
    """A table's text: several lines, each cell already through :func:`clean`."""


def table(rows, headers=(), **options) -> Table:
    """``tabulate`` with every cell and header passed through :func:`clean`."""
    from tabulate import tabulate

    safe_rows = [[clean(cell) if isinstance(cell, str) else cell for cell in row] for row in rows]
    return Table(tabulate(safe_rows, headers=[clean(h) for h in headers], **options))


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
