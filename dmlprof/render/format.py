"""Formatting shared by the text renderers: one place for units, and for what may reach a terminal."""
from __future__ import annotations

import dataclasses
import re
import shutil
import textwrap
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

# one formatter per unit for the whole house: the report composes its sentences with them too
from dmlprof.units import fmt_bytes, fmt_count, fmt_ms, fmt_rate, fmt_share  # noqa: F401

# C0 controls (ESC, CR, LF, BS...), DEL and C1 controls (0x9b is a one-byte CSI on some terminals)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(value) -> str:
    """``value`` as text safe to print: control characters shown as ``\\xNN``.

    Op, module and source names come from sessions people send each other; raw,
    an escape sequence could retitle or recolour the terminal and a newline
    could forge a report line. Every name a text report prints goes through here.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value if isinstance(value, str) else str(value))


def clean_all(value):
    """``value`` with every string inside it (dict keys and values, list items) through :func:`clean`."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean_all(key): clean_all(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(clean_all(item) for item in value)
    return value


class Table(str):
    """A table's text: several lines, each cell already through :func:`clean`."""


def table(rows, headers=(), **options) -> Table:
    """``tabulate`` with every cell and header passed through :func:`clean`."""
    from tabulate import tabulate

    safe_rows = [[clean(cell) if isinstance(cell, str) else cell for cell in row] for row in rows]
    return Table(tabulate(safe_rows, headers=[clean(h) for h in headers], **options))


# -- fitting text to a terminal ------------------------------------------------------------------
#: how a column too wide for the terminal gives way: wrapped onto more lines, or cut keeping its end
#: (``...net.py:40``: a source line's file and number are its end) or its start
WRAP, KEEP_END, KEEP_START = "wrap", "keep end", "keep start"
#: the width used when none can be read (a pipe, a file): a default Windows console's
DEFAULT_WIDTH = 120
#: narrower than this, tables cannot fit whatever we do: lay out for this and let the terminal wrap
NARROWEST = 60
#: a column given way is never cut narrower than this (or its own widest cell, if narrower)
_NARROWEST_COLUMN = 10


def terminal_width(width: Optional[int] = None) -> int:
    """``width``, or the terminal's (``COLUMNS`` first, as :func:`shutil.get_terminal_size` reads it)."""
    if width is None:
        width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return max(int(width), NARROWEST)


@dataclass(frozen=True)
class TableSpec:
    """A table not yet laid out: cells, headers, and how each named column gives way to a narrow terminal."""

    rows: Sequence[Sequence]
    headers: Sequence[str] = ()
    fit: Mapping[str, str] = field(default_factory=dict)  # header -> WRAP, KEEP_END or KEEP_START
    options: Mapping = field(default_factory=dict)  # passed to tabulate
    #: headers of columns that, when the whole table is too wide, leave it for a line under their row
    #: (a module path or a source line cut to fit loses the part that says where: better whole, below)
    details: Sequence[str] = ()
    #: the detail columns always go under their row (prose columns squeezed beside others read as fragments)
    details_below: bool = False

    def render(self, width: int) -> Table:
        """The table at most ``width`` columns wide, giving way widest column first."""
        if self.details and self.details_below:
            return self._with_detail_lines(width)
        if self.details:
            whole = dataclasses.replace(self, details=()).render(width)
            if max(map(len, whole.splitlines()), default=0) <= width and "..." not in whole:
                return whole
            return self._with_detail_lines(width)
        return self._laid_out(width)[0]

    def _laid_out(self, width: int) -> tuple:
        """The table's text and its rows as shaped into it (a cell wrapped onto lines holds newlines)."""
        rows = [_clean_cells(row) for row in self.rows]
        headers = _clean_cells(self.headers)
        columns = self._modes()
        limits = {i: _natural_width(rows, headers, i) for i in columns}
        text, shaped = self._tabulate(rows, headers, columns, limits)
        for _ in range(16):  # each pass frees what the last one measured over; two or three settle it
            over = max(map(len, text.splitlines()), default=0) - width
            if over <= 0 or not _narrow(limits, over, columns):
                break
            text, shaped = self._tabulate(rows, headers, columns, limits)
        return text, shaped

    def _with_detail_lines(self, width: int) -> Table:
        """The table without the detail columns, each row followed by its detail cells, one indented line each."""
        kept = [i for i, header in enumerate(self.headers) if header not in self.details]
        narrow = dataclasses.replace(self, rows=[[row[i] for i in kept] for row in self.rows],
                                     headers=[self.headers[i] for i in kept], details=())
        text, shaped = narrow._laid_out(width)
        lines = text.splitlines()
        out, cursor = lines[:2], 2  # the header and its rule
        for row, shaped_row in zip(self.rows, shaped):
            height = max((str(cell).count("\n") + 1 for cell in shaped_row), default=1)
            out += lines[cursor:cursor + height] + self._detail_lines(row, width)
            cursor += height
        return Table("\n".join(out + lines[cursor:]))

    def _detail_lines(self, row, width: int) -> list:
        shown = [(header, str(cell)) for header, cell in zip(self.headers, row) if header in self.details]
        return [line for header, cell in shown if cell.strip() not in ("", "-")
                for line in wrap_line(f"    {header} {clean(cell)}", width)]

    def _modes(self) -> dict:
        """Column index -> how it gives way (``fit`` names columns by header, or by index)."""
        by_index = {i: self.fit[h] for i, h in enumerate(self.headers) if h in self.fit}
        return {**by_index, **{i: mode for i, mode in self.fit.items() if isinstance(i, int)}}

    def _tabulate(self, rows, headers, columns, limits) -> Table:
        import tabulate

        shaped = [[_shape(cell, limits[i], columns[i]) if i in columns else cell for i, cell in enumerate(row)]
                  for row in rows]
        shaped_headers = [_shape(h, limits[i], WRAP) if i in columns else h for i, h in enumerate(headers)]
        # tabulate pads every header by two (MIN_PADDING, a module global it reads per call): seven
        # columns lose 14 characters to it, which an 80-column terminal cannot spare
        padding, tabulate.MIN_PADDING = tabulate.MIN_PADDING, 0
        try:
            return Table(tabulate.tabulate(shaped, headers=shaped_headers, **self.options)), shaped
        finally:
            tabulate.MIN_PADDING = padding


def _clean_cells(cells) -> list:
    return [clean(cell) if isinstance(cell, str) else cell for cell in cells]


def _natural_width(rows, headers, column: int) -> int:
    cells = [str(row[column]) for row in rows if column < len(row)]
    cells += [headers[column]] if column < len(headers) else []
    return max((len(cell) for cell in cells), default=0)


def _narrow(limits: dict, over: int, modes: dict) -> bool:
    """Free up to ``over`` characters, in stages (:data:`_STAGES`); False if no column can give way."""
    cut = [i for i in limits if modes[i] != WRAP]
    wrapped = [i for i in limits if modes[i] == WRAP]
    groups = {"cut": cut, "wrapped": wrapped, "all": list(limits)}
    return any(_lower(limits, over, groups[group], narrowest) for group, narrowest in _STAGES)


#: the order columns give way in: cut columns (module paths, source lines) to a readable width, then
#: wrapped ones (op names) to two short lines, then cut ones further, then all alike
_STAGES = (("cut", 18), ("wrapped", 24), ("cut", 12), ("all", _NARROWEST_COLUMN))


def _lower(limits: dict, over: int, columns: list, narrowest: int) -> bool:
    """Lower the widest of ``columns`` to one level (none below ``narrowest``); False if none is above it."""
    movable = [i for i in columns if limits[i] > narrowest]
    if not movable:
        return False
    level = max(limits[i] for i in movable) - 1
    while level > narrowest and _freed(limits, movable, level) < over:
        level -= 1
    for i in movable:
        limits[i] = min(limits[i], level)
    return True


def _freed(limits: dict, columns: list, level: int) -> int:
    """Characters lowering ``columns`` to ``level`` would free."""
    return sum(max(0, limits[i] - level) for i in columns)


def _shape(cell, limit: int, mode: str):
    """One cell at most ``limit`` characters wide (numbers are left alone: they are short)."""
    if not isinstance(cell, str) or len(cell) <= limit:
        return cell
    if mode == WRAP:
        return "\n".join(_wrap_name(cell, limit))
    if mode == KEEP_END:
        return "..." + cell[-(limit - 3):]
    return cell[:limit - 3] + "..."


#: where a name may break: after a space, ``::``, ``_``, ``/`` or ``,``, and after a ``.`` before a letter
#: (``aten::native_|group_|norm``, ``lerp.|Scalar``; never inside ``0.188``)
_BREAKS = re.compile(r"(?<=[\s_/,])(?=[^\s_/,])|(?<=::)(?=\w)|(?<=\.)(?=[A-Za-z_])")


def _wrap_name(text: str, limit: int) -> list:
    """``text`` in lines at most ``limit`` wide: between words where they fit (``a -> b`` keeps each op name
    whole), inside a word only where it is wider than the column, where a name breaks naturally, else hard."""
    lines = [""]
    for word in re.split(r"(?<=\s)(?=\S)", text):
        pieces = [word] if len(word.rstrip()) <= limit else _BREAKS.split(word)
        for piece in pieces:
            while len(piece) > limit:  # a piece wider than the column: cut it hard
                lines, piece = _add_piece(lines, piece[:limit], limit), piece[limit:]
            lines = _add_piece(lines, piece, limit)
    return [line.rstrip() for line in lines if line.strip()]


def _add_piece(lines: list, piece: str, limit: int) -> list:
    if len(lines[-1]) + len(piece.rstrip()) <= limit:
        lines[-1] += piece
    else:
        lines.append(piece.lstrip())
    return lines


def wrap_line(line: str, width: int) -> list:
    """One line of prose as lines at most ``width`` wide; continuation lines indented two more than the first."""
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [line[:width]]


def fmt_list(values, limit: int = 2) -> str:
    values = list(values or [])
    if len(values) <= limit:
        return ", ".join(values)
    return ", ".join(values[:limit]) + f" (+{len(values) - limit})"


def verdict_counts(counts) -> str:
    """``device 2, fallback 1``: an op's calls per step by verdict on one rank (``never called`` for none)."""
    return ", ".join(f"{clean(verdict)} {value:g}" for verdict, value in sorted(counts.items())) or "never called"
