"""Signals that end a run, and the saving of what a stopped run recorded.

Ctrl-C (SIGINT), ``kill``/``timeout``/a CI job's cancel (SIGTERM) and a closed
terminal or SSH session (SIGHUP) all end a scan the same way: the steps stop and
what was recorded is saved as a partial session (:func:`stopping` turns the last
two into :class:`Stopped`, a KeyboardInterrupt, as Python turns the first).
Turning a long recording into a session then takes a while (torch.profiler's stop
alone is seconds per 50,000 calls); another signal in that window must not throw
the recording away, so while :func:`saving` is active they only wait for it.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

from dmlprof import progress
from dmlprof.errors import Interrupted

#: recordings at least this long say they are being saved (below, saving takes well under a second)
ANNOUNCE_CALLS = 20_000
#: signals that end a run as Ctrl-C does (SIGHUP does not exist on Windows)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
#: the real ``os._exit``, taken before a scan traps the scanned code's calls to it (dmlprof.runner.user_code):
#: dmlprof's own ways out (a hung rank's watchdog, a forked child, a scan's end past threads the script left
#: running) must really leave, and not be taken for the script's own call
REAL_OS_EXIT = os._exit


#: the signals :func:`saving` held since :func:`forget_held`, in order: a finished run that a signal reached
#: while it was being saved still ends as that signal says, once the saving is done (:func:`held_stop`)
_held: list = []


def forget_held() -> None:
    _held.clear()


def held_stop():
    """What the first signal :func:`saving` held stands for (``KeyboardInterrupt`` or :class:`Stopped`), or None."""
    if not _held:
        return None
    return KeyboardInterrupt() if _held[0] == signal.SIGINT else Stopped(_held[0])


class SignalStop(KeyboardInterrupt):
    """A stop one of dmlprof's own signal handlers raised in the main thread (:class:`Stopped`, and a distributed
    rank's ``LauncherStop``): code that runs the script's own handlers lets it through, where it would print and
    ignore the script's KeyboardInterrupt."""


class Stopped(SignalStop):
    """SIGTERM or SIGHUP, raised in the main thread: the run ends as on Ctrl-C, keeping what it recorded."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code(stop: BaseException) -> int:
    """The exit status a run ended by ``stop`` has: 130 for Ctrl-C, 128 + the signal's number for the others."""
    return 128 + stop.signum if isinstance(stop, Stopped) else 130


def cause_of(stop: BaseException, what: str = "interrupted") -> Interrupted:
    """The one-line error of a run ended by ``stop`` (a KeyboardInterrupt): ``interrupted``, or
    ``stopped by SIGTERM`` with that signal's exit status."""
    if isinstance(stop, Stopped):
        error = Interrupted(what.replace("interrupted", f"stopped by {signal_name(stop.signum)}", 1))
        error.exit_code = exit_code(stop)
        return error
    return Interrupted(what)


def stop_of(error: Interrupted) -> BaseException:
    """The stop (``KeyboardInterrupt`` or :class:`Stopped`) an :class:`Interrupted` error of :func:`cause_of`
    stands for, read from its exit status."""
    code = getattr(error, "exit_code", 130)
    return Stopped(code - 128) if code != 130 else KeyboardInterrupt()


def announce(calls: int) -> None:
    """Say, once Ctrl-C stopped a long recording, that it is being saved (short ones stay quiet)."""
    if calls >= ANNOUNCE_CALLS:
        _say(f"dmlprof: interrupted; saving the {calls:,} op calls recorded so far "
             "(Ctrl-C again will not stop this)...")


def _say(line: str) -> None:
    try:
        progress.say(line)
    except (OSError, ValueError):  # no terminal left to say it on (SIGHUP): saving matters more
        pass


def handle(signums, handler) -> dict:
    """Set ``handler`` for ``signums`` (main thread only; elsewhere nothing is set): {signal: previous handler}.

    A signal the process was started ignoring stays ignored, as Python leaves an ignored SIGINT: ``nohup dmlprof
    scan ...`` asked that a closed terminal not end the scan.
    """
    previous = {}
    for signum in signums:
        try:
            if signal.getsignal(signum) == signal.SIG_IGN:
                continue
            previous[signum] = signal.signal(signum, handler)
        except (ValueError, OSError, AttributeError):  # not the main thread, or no signals here
            continue
    return previous


def restore(previous: dict) -> None:
    """Put back what :func:`handle` replaced."""
    for signum, handler in previous.items():
        try:
            signal.signal(signum, handler)
        except (ValueError, OSError, TypeError):
            pass


@contextmanager
def stopping():
    """For the length of the block, SIGTERM and SIGHUP raise :class:`Stopped` in the main thread (a no-op
    elsewhere), so they end a run the way Ctrl-C does: with its partial session saved."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    scanning = os.getpid()

    def stop(signum, frame):
        if os.getpid() != scanning:  # a process the script forked inherited this handler: it ends as it would
            _as_before(signum, frame, previous.get(signum, signal.SIG_DFL))  # without dmlprof (Pool.terminate)
            return
        raise Stopped(signum)

    previous = handle(STOP_SIGNALS, stop)
    try:
        yield
    finally:
        restore(previous)


def _as_before(signum: int, frame, before) -> None:
    """What the handler dmlprof replaced does with ``signum``: the default action ends the process by the signal
    (a script's ``p.exitcode == -15``, no ``finally`` run, no traceback), as a forked child of plain python ends."""
    if callable(before):
        before(signum, frame)
    elif before != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


@contextmanager
def saving():
    """Defer Ctrl-C, SIGTERM and SIGHUP for the length of the block (main thread only; elsewhere a no-op).

    Ctrl-C says once that saving goes on; the others wait silently (nobody may be there to read it).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    told = []

    def hold_on(signum, frame):
        _held.append(signum)
        if signum == signal.SIGINT and not told:
            told.append(True)
            _say("dmlprof: still saving what was recorded; it will be kept")

    previous = handle((signal.SIGINT,) + STOP_SIGNALS, hold_on)
    try:
        yield
    finally:
        restore(previous)
