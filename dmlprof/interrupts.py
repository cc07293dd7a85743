"""Ctrl-C while dmlprof saves what a stopped run recorded.

The first Ctrl-C stops the user's steps; turning a long recording into a
session then takes a while (torch.profiler's stop alone is seconds per 50,000
calls). A second Ctrl-C in that window must not throw the recording away, so
while :func:`saving` is active Ctrl-C only says that saving goes on.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from dmlprof import progress

#: recordings at least this long say they are being saved (below, saving takes well under a second)
ANNOUNCE_CALLS = 20_000


def announce(calls: int) -> None:
    """Say, once Ctrl-C stopped a long recording, that it is being saved (short ones stay quiet)."""
    if calls >= ANNOUNCE_CALLS:
        progress.say(f"dmlprof: interrupted; saving the {calls:,} op calls recorded so far "
                     "(Ctrl-C again will not stop this)...")


@contextmanager
def saving():
    """Defer Ctrl-C for the length of the block (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    told = []

    def hold_on(signum, frame):
        if not told:
            told.append(True)
            progress.say("dmlprof: still saving what was recorded; it will be kept")

    try:
        previous = signal.signal(signal.SIGINT, hold_on)
    except (ValueError, OSError, AttributeError):  # no signals here (embedded interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
