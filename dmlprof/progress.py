"""Progress of a long run's phases (warm-up, steps, trace processing, sweep sizes) on stderr.

The runner and the sweep driver say what they are doing, once a phase and
once a step, never once an op::

    with progress.phase("warm-up", total=warmup) as bar:
        for _ in range(warmup):
            run_step()
            bar.advance()

By default nothing is shown (the Python API and the tests print nothing); the
CLI turns the bars on with :func:`shown` when stderr is a terminal and the
user did not ask for ``--quiet`` or ``--no-progress`` (off a terminal, a CI log,
only the start of a long wait is noted, one line). Bars are drawn by tqdm,
one line at a time (an inner phase replaces the outer one's line until it
ends: no cursor movement, which old Windows consoles print as ``<-[A``), and
are cleared when they end, so the report that follows starts on a clean line.
Where stderr's encoding cannot take tqdm's block characters (a cp1252
console) the bars are drawn in ASCII.

The reporter is held in a context variable: a thread started while bars are
shown (the sweep's ``--devices`` threads) sees none unless it is given one.
"""
from __future__ import annotations

import contextvars
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional, TextIO

#: how often an open bar redraws its clock while nothing advances (a 30 s step, the trace being read)
TICK_S = 0.5
#: the width and height assumed where a terminal reports none (a serial console, a fresh pseudo-terminal)
FALLBACK_SIZE = (80, 24)
#: tqdm's smooth bar characters; a stream that cannot encode them gets tqdm's ASCII bar
_BAR_CHARACTERS = "\u2588\u258f"


class Phase:
    """One phase as the code running it sees it; this one shows nothing (the default)."""

    def advance(self, steps: int = 1) -> None:
        """``steps`` more of the phase's total are done."""

    def describe(self, text: str) -> None:
        """A few words after the bar (``bs=16 running``)."""

    def tick(self) -> None:
        """Redraw the clock (callers that wait on something else, like a child process)."""

    def follow(self, text: Callable[[], str]) -> None:
        """Show ``text()`` after the bar, read again at every redraw of its clock: what a long step has done so
        far (its calls), where a step's own count would stay at 0 for minutes. ``text`` runs on the clock's
        thread: it must only read (a counter), never touch tensors."""


class Reporter:
    """Opens phases; this one shows nothing."""

    #: whether this reporter draws bars (work done only to feed a bar, such as counting calls, is skipped
    #: where nothing is drawn)
    draws = False

    @contextmanager
    def phase(self, name: str, total: Optional[int] = None, unit: str = "step") -> Iterator[Phase]:
        yield _SILENT

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        yield

    def say(self, line: str) -> None:
        """Print ``line`` on stderr."""
        print(line, file=sys.stderr, flush=True)

    def note(self, line: str) -> None:
        """A long wait about to begin, for a log that draws no bars (:class:`LogReporter`); silent here."""


class LogReporter(Reporter):
    """Progress asked for where no bar can be drawn (a CI log, a pipe): no bars, only the notes of long waits."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def note(self, line: str) -> None:
        try:
            print(line, file=self.stream, flush=True)
        except (OSError, ValueError):  # a closed log: progress is never worth an error
            pass


_SILENT = Phase()
_current: contextvars.ContextVar = contextvars.ContextVar("dmlprof_progress", default=Reporter())


def phase(name: str, total: Optional[int] = None, unit: str = "step"):
    """A context manager yielding a :class:`Phase` named ``name`` (``total`` of ``unit``; None: open-ended)."""
    return _current.get().phase(name, total, unit)


def stage(name: str):
    """A context manager naming the larger task the phases inside belong to (``scan 2/2, patched``):
    it prefixes their bars."""
    return _current.get().stage(name)


def say(line: str) -> None:
    """Print ``line`` on stderr, above the bar being drawn if there is one (never into its line)."""
    _current.get().say(line)


def drawn() -> bool:
    """Whether the phases opened here are drawn (on a terminal): only then is a live count worth keeping."""
    return _current.get().draws


def note(line: str) -> None:
    """Say that a long wait begins (a build), where progress is asked for but no bar is drawn (a CI log)."""
    _current.get().note(line)


def wanted(stream: Optional[TextIO], requested: bool = True) -> bool:
    """Bars are drawn only when asked for and ``stream`` is a terminal (never into a pipe, a file or a CI log)."""
    if not requested or stream is None:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or not a real stream
        return False


@contextmanager
def shown(stream: Optional[TextIO], requested: bool = True) -> Iterator[bool]:
    """Draw the phases opened inside on ``stream`` when :func:`wanted` says so; yields whether it does. Asked
    for off a terminal, long waits are noted there in a line each instead (:func:`note`)."""
    if not wanted(stream, requested):
        if not requested or stream is None:
            yield False
            return
        with using(LogReporter(stream)):
            yield False
        return
    reporter = TerminalReporter(stream)
    try:
        with using(reporter):
            yield True
    finally:
        reporter.close()


def off():
    """No bars inside, whatever is shown outside (work that runs beside other work)."""
    return using(Reporter())


@contextmanager
def using(reporter: Reporter) -> Iterator[Reporter]:
    """Phases opened inside (in this thread or task) go to ``reporter``."""
    token = _current.set(reporter)
    try:
        yield reporter
    finally:
        _current.reset(token)


def ascii_only(stream: TextIO) -> bool:
    """Whether ``stream``'s encoding cannot encode tqdm's block characters."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        _BAR_CHARACTERS.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def terminal_size(stream: TextIO) -> Optional[tuple]:
    """``(columns, lines)`` of the terminal behind ``stream`` when it reports a usable one, else None.

    tqdm draws nothing at all on a terminal that reports 0 lines, so such a
    terminal gets :data:`FALLBACK_SIZE` instead of tqdm's own reading.
    """
    import os

    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return None
    return (size.columns, size.lines) if size.columns > 0 and size.lines > 0 else None


class _Bar(Phase):
    """A phase drawn as a tqdm bar. Every draw holds the reporter's lock: the clock thread redraws too, and two
    draws at once interleave their bytes (a line left on screen, drawn twice without its carriage return)."""

    #: how a followed phase is drawn: its count, its clock and what it follows, no rate (a first step's rate
    #: is a guess) and no bar, so the count stays readable at 80 columns
    FOLLOWED_FORMAT = "{desc}: {n_fmt}/{total_fmt} [{elapsed}{postfix}]"

    def __init__(self, bar, lock):
        self.bar = bar
        self._lock = lock
        self._text: Optional[Callable[[], str]] = None

    def advance(self, steps: int = 1) -> None:
        with self._lock:
            self._read_followed()
            self.bar.update(steps)

    def describe(self, text: str) -> None:
        with self._lock:
            self.bar.set_postfix_str(text, refresh=True)

    def tick(self) -> None:
        with self._lock:
            self._read_followed()
            self.bar.refresh()

    def follow(self, text: Callable[[], str]) -> None:
        with self._lock:
            self._text = text
            if self.bar.total:
                self.bar.bar_format = self.FOLLOWED_FORMAT
            self._read_followed()
            self.bar.refresh()

    def _read_followed(self) -> None:
        if self._text is not None:
            self.bar.set_postfix_str(self._text(), refresh=False)


class TerminalReporter(Reporter):
    """tqdm bars on a terminal stream, one line: the innermost open phase's."""

    draws = True

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.ascii = ascii_only(stream)
        # tqdm follows a resized terminal; one that reports no size gets a fixed one
        self.size = {} if terminal_size(stream) else {"ncols": FALLBACK_SIZE[0], "nrows": FALLBACK_SIZE[1]}
        self._stages: List[str] = []
        self._open: List[_Bar] = []
        self._lock = threading.RLock()  # reentrant: a Ctrl-C handler may say() while a bar is drawn
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._stages.append(name)
        try:
            yield
        finally:
            self._stages.pop()

    @contextmanager
    def phase(self, name: str, total: Optional[int] = None, unit: str = "step") -> Iterator[Phase]:
        from tqdm import tqdm

        label = ", ".join(self._stages + [name])
        with self._lock:
            if self._open:
                self._open[-1].bar.clear()  # the inner phase takes the line until it ends
            # every advance is drawn (it comes once a step, never once an op); leave=False clears the line
            bar = _Bar(tqdm(total=total, desc=label, file=self.stream, leave=False, position=0, ascii=self.ascii,
                            dynamic_ncols=not self.size, **self.size, mininterval=0, miniters=1,
                            unit=unit if total else "it", bar_format=None if total else "{desc}: {elapsed}{postfix}"),
                       self._lock)
            self._open.append(bar)
        self._start_ticker()
        try:
            yield bar
        finally:
            with self._lock:
                self._open.remove(bar)
                bar.bar.close()
                if self._open:
                    self._open[-1].bar.refresh()

    def say(self, line: str) -> None:
        with self._lock:
            top = self._open[-1].bar if self._open else None
            if top is not None:
                top.clear()
            self.stream.write(line + "\n")
            self.stream.flush()
            if top is not None:
                top.refresh()

    def _start_ticker(self) -> None:
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="dmlprof-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        """Redraw the innermost bar's clock now and then, so a long step or trace read shows it is alive."""
        while not self._stop.wait(TICK_S):
            with self._lock:
                top = self._open[-1] if self._open else None
                if top is not None:
                    try:
                        top.tick()
                    except Exception:  # a closed or broken stream: progress is never worth an error
                        pass

    def close(self) -> None:
        """Stop the clock thread (the bars close with their phases)."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
