"""A scanned script that forks (``os.fork``, multiprocessing's ``fork``): the child runs as without dmlprof.

The child starts as a copy of the parent, recorder, step window and torch.profiler included. Left alone,
it recorded its own calls, was stopped by the parent's step window after a few optimizer steps, and, back
in dmlprof's code when its script ended, reported and saved a second session (with the profiler on, it
waited for ever on the parent's profiler, and the parent on it). So in the child nothing of the recording
carries on (:func:`_stop_recording_in_child`, at fork), and when its code ends the child ends
(:func:`forked_child_ends_here`), with the status plain Python would give it.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Optional

import torch

from dmlprof.interrupts import REAL_OS_EXIT
from dmlprof.record.recorder import Recorder


def _stop_recording_in_child() -> None:
    """At fork, in the child: its calls are not recorded, and its optimizer steps never stop it."""
    recorder = Recorder.current
    if recorder is None:
        return
    recorder.active = False
    torch._C._dispatch_tls_set_dispatch_key_included(recorder.tap.key, False)
    if recorder.window is not None:
        recorder.window.closed = recorder.window.run_to_end = True


if hasattr(os, "register_at_fork"):  # POSIX; there is no fork elsewhere
    os.register_at_fork(after_in_child=_stop_recording_in_child)


@contextmanager
def forked_child_ends_here(exits=(SystemExit,)):
    """Around the scanned code: a forked child that comes back out of it ends here, as the process it
    would be under plain Python (``exits``: the exceptions that carry an exit status, ``code``)."""
    pid = os.getpid()
    try:
        yield
    except BaseException as exc:
        if os.getpid() != pid:
            _end_child(exc, exits)
        raise
    if os.getpid() != pid:
        _end_child(None, exits)


def _end_child(exc: Optional[BaseException], exits) -> None:
    """Leave the forked child with the status plain Python would give it (1 and a traceback for an error)."""
    code = 0
    if isinstance(exc, exits):
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    elif exc is not None:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    REAL_OS_EXIT(code)
