"""A plain-text progress bar on stderr (ASCII, carriage returns only: fine on Windows consoles)."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

BAR_WIDTH = 20


def bar_text(done: int, total: int, label: str, width: int = BAR_WIDTH, at_most: bool = False) -> str:
    """``[#####...............] 1/4 bs=32 running`` (``at_most``: the total is an upper bound)."""
    total = max(total, 1)
    filled = min(width, int(round(width * min(done, total) / total)))
    count = f"{done}/{'<=' if at_most else ''}{total}"
    return f"[{'#' * filled}{'.' * (width - filled)}] {count} {label}".rstrip()


class Progress:
    """Redraws one line in a terminal; elsewhere (a pipe, a CI log) prints one line per size."""

    def __init__(self, total: int, *, at_most: bool = False, stream: Optional[TextIO] = None, enabled: bool = True):
        self.total = total
        self.at_most = at_most
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0
        self._width = 0
        self._started = time.monotonic()
        try:
            self.interactive = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.interactive = False

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self._started:.0f}s"

    def start(self, batch_size: int) -> None:
        """A size begins (drawn in a terminal only: a log gets the finished line)."""
        if self.enabled and self.interactive:
            self._draw(bar_text(self.done, self.total, f"bs={batch_size} running... {self._elapsed()}", at_most=self.at_most))

    def finish(self, batch_size: int, outcome: str) -> None:
        """A size ended with ``outcome`` (e.g. ``ok 1234 samples/s``)."""
        self.done += 1
        if not self.enabled:
            return
        text = bar_text(self.done, self.total, f"bs={batch_size} {outcome} {self._elapsed()}", at_most=self.at_most)
        if self.interactive:
            self._draw(text)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.interactive and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def _draw(self, text: str) -> None:
        pad = max(0, self._width - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)
