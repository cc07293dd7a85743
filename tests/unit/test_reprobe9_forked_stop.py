"""Re-probe 9: a process the scanned script forks ends by SIGTERM as it does without dmlprof.

GIVEN a scan's stop handler (SIGTERM raises Stopped, so the run keeps what it recorded)
WHEN  the script forks a child (``multiprocessing`` fork ``Process``/``Pool``) and terminates it
THEN  the child dies of the signal (exitcode -SIGTERM), its ``finally`` blocks unrun, no traceback: it inherited
      dmlprof's handler, raised Stopped in the script's code (exitcode 1, a traceback per worker, files written).
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time

import pytest

from dmlprof import interrupts

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                                reason="fork start method: POSIX (macOS's fork is unsafe under torch)")


def _wait_then_write(path):
    try:
        time.sleep(30)
    finally:
        with open(path, "w") as marker:
            marker.write("finally ran")


def test_a_forked_child_terminated_by_the_script_dies_of_the_signal(tmp_path):
    marker = tmp_path / "finally.txt"
    with interrupts.stopping():
        child = multiprocessing.get_context("fork").Process(target=_wait_then_write, args=(str(marker),))
        child.start()
        time.sleep(0.3)
        child.terminate()
        child.join(20)
    assert child.exitcode == -signal.SIGTERM
    assert not marker.exists()


def test_the_scanning_process_itself_still_stops_with_its_recording():
    with pytest.raises(interrupts.Stopped):
        with interrupts.stopping():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
