"""The prediction's note of every abort its stand-in device raises in a call's place, recorded or not.

The stand-in's kernels raise "torch-directml ends the process here" where the real one dies; a call nothing
records (another thread's, an unrecorded step's) that the code caught was otherwise never known to the run. The
run reads this note after each step and at its end (``Backend.take_abort_note``), as it reads the emulated
device's (whose note is kept in its C++). Threads of one process only: a prediction's tensors have no memory a
forked child could carry on with.
"""
from __future__ import annotations

import os
import threading

from dmlprof.directml.failures import AbortNote

_lock = threading.Lock()
_count = 0
_first = None


def note_abort(op: str, message: str) -> None:
    """An abort the stand-in is about to raise in ``op``'s place (``message``: its error text)."""
    global _count, _first
    with _lock:
        _count += 1
        if _first is None:
            _first = (op, message, os.getpid(), threading.get_native_id())


def take_abort_note():
    """The aborts noted since the last take (:class:`~dmlprof.directml.failures.AbortNote`), or ``None``; each is taken once."""
    global _count, _first
    with _lock:
        count, first = _count, _first
        _count, _first = 0, None
    if not count:
        return None
    op, message, pid, thread = first
    return AbortNote(count, op, message, pid, thread)
