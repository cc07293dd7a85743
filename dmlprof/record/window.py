"""Which optimizer steps of a script are recorded, and when the script is stopped.

A training script runs for hours; ``scan train.py --warmup N --steps M`` counts
its optimizer steps: the calls before its first step are recorded (a script
that never steps, such as an inference script, is recorded whole), steps 2..N
run unrecorded, steps N+1..N+M are recorded and numbered 0..M-1, and then the
script is stopped (or, with ``--run-to-end``, left to finish unrecorded).
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

import torch

from dmlprof import progress
from dmlprof.meta import ScriptWindow


class WindowClosed(BaseException):
    """Raised out of the script's ``optimizer.step()`` when the recorded steps are done.

    A BaseException, like KeyboardInterrupt, so that a script's ``except
    Exception`` does not swallow it; its ``finally`` blocks still run.
    """


def _quiet_in_threads() -> None:
    """A script whose optimizer steps run on a thread of its own is stopped there: WindowClosed ends that
    thread as it ends the main thread's script, cleanly, without Python's "Exception in thread" traceback
    (the main thread then runs on, unrecorded, to the script's end). Installed once; only WindowClosed,
    which nothing but dmlprof raises, is affected."""
    previous = threading.excepthook
    if getattr(previous, "_dmlprof", False):
        return

    def hook(args):
        if args.exc_type is not None and issubclass(args.exc_type, WindowClosed):
            return
        previous(args)

    hook._dmlprof = True
    threading.excepthook = hook


class StepWindow:
    def __init__(self, warmup: int, steps: int, run_to_end: bool = False,
                 on_close: Optional[Callable[[], None]] = None):
        _quiet_in_threads()
        self.warmup, self.steps, self.run_to_end = warmup, steps, run_to_end
        self.on_close = on_close
        #: optimizer steps the script has taken
        self.taken = 0
        self.closed = False
        #: the bar counting the script's steps (shows nothing unless the CLI draws bars)
        self.progress: progress.Phase = progress.Phase()
        #: where the calls of the step under way are counted from for that bar (``step_begins()``), if anywhere
        self.step_calls = None

    def after_step(self, recorder) -> None:
        """Called after each optimizer step of the script (on the thread that stepped)."""
        self.taken += 1
        if recorder.journal is not None:
            recorder.journal.step_taken(self.taken)
        if recorder.backend.first_refusal is not None:
            # the script caught a refused call (or the emulated device's error in its place) and stepped on: on
            # DirectML its process ended there, so the script goes no further (not to its end with --run-to-end)
            self._close(recorder)
            raise WindowClosed()
        if self.closed:
            return
        self.progress.advance()
        if self.taken == 1 and self.warmup > 1:
            _set_recording(recorder, False)  # steps 2..N: warm-up, unrecorded
        if self.taken == self.warmup:
            recorder.drop_rows()
            _set_recording(recorder, True)
        recorder.step = self.taken - self.warmup if self.taken >= self.warmup else self.taken
        if self.step_calls is not None:
            self.step_calls.step_begins()  # after the warm-up's rows were dropped: counted from what is held
        if self.taken == self.warmup + self.steps:
            self._close(recorder)
            if not self.run_to_end:
                raise WindowClosed()

    def _close(self, recorder) -> None:
        if self.closed:
            return
        self.closed = True
        _set_recording(recorder, False)
        if self.on_close is not None:
            self.on_close()

    def describe(self) -> ScriptWindow:
        """The window as the session's run facts hold it."""
        return ScriptWindow(warmup_steps=self.warmup, steps_requested=self.steps, optimizer_steps_taken=self.taken,
                            window_closed=self.closed, run_to_end=self.run_to_end)


def _set_recording(recorder, on: bool) -> None:
    torch._C._dispatch_tls_set_dispatch_key_included(recorder.tap.key, on)
    recorder.unrecorded_steps = not on  # what the other threads' writes read (dmlprof.record.thread_writes)
