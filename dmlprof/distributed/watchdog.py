"""Each rank's heartbeat, and the watchdog that ends a rank stuck at a collective.

A rank waiting at a collective for a peer that never comes is blocked inside
C++ (gloo's wait, DDP's reducer): no Python code of its own runs again, not
even a signal handler. So a thread of its own watches the recorder: when the
last call recorded is a collective and nothing else has been recorded for
``timeout_s``, it saves what was recorded, says in one line which rank it
waited for, and ends the process (the launcher then stops the others, which
save their own sessions).

Which rank is to blame comes from the heartbeats: every rank writes, about
once a second, how many calls and collectives it has recorded into
``RUN_DIR/.progress/rank<N>.json``; a rank that issued fewer collectives than
the waiting one never got there.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from dmlprof.files import process_alive
from dmlprof.interrupts import REAL_OS_EXIT
from dmlprof.record.collectives import COMM_PHASE
from dmlprof.files import write_atomic

PROGRESS_DIR = ".progress"
#: how often the heartbeat is written and the stall checked
TICK_S = 0.5
#: exit status of a rank the watchdog ended (a hang at a collective)
EXIT_HUNG = 5


@dataclass
class Progress:
    """What one rank had recorded at its last heartbeat."""

    rank: int
    pid: int
    calls: int = 0
    collectives: int = 0
    step: int = 0
    last_op: str = ""
    last_phase: str = ""
    idle_s: float = 0.0
    written_at: float = 0.0
    finished: bool = False

    @classmethod
    def read(cls, path: Path) -> Optional["Progress"]:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (OSError, ValueError, TypeError):
            return None


def progress_path(folder: Path, rank: int) -> Path:
    return Path(folder) / PROGRESS_DIR / f"rank{int(rank)}.json"


def read_peers(folder: Path, world_size: int, rank: int) -> dict:
    """{rank: Progress or None} for every other rank of the job."""
    return {r: Progress.read(progress_path(folder, r)) for r in range(world_size) if r != rank}


def blame(me: Progress, peers: dict) -> tuple:
    """(the ranks the waiting rank ``me`` waits for, why: one phrase each)."""
    culprits, why = [], []
    for rank, peer in sorted(peers.items()):
        if peer is None:
            culprits.append(rank)
            why.append(f"rank {rank} never reported progress")
        elif process_alive(peer.pid) is False and not peer.finished:
            culprits.append(rank)
            why.append(f"rank {rank}'s process is gone (it had issued {peer.collectives} collectives)")
        elif peer.collectives < me.collectives:
            culprits.append(rank)
            last = f"{peer.last_op} at step {peer.step}" if peer.last_op else "nothing"
            why.append(f"rank {rank} issued {peer.collectives} collectives; its last call {last}, "
                       f"{peer.idle_s:.0f} s before its last heartbeat")
    return culprits, "; ".join(why)


class Watchdog:
    """Heartbeat writer and stall detector for one rank; a context manager.

    ``current()`` returns the recorder now recording (or None); ``on_hang(line)``
    is called once, from the watchdog thread, when the rank is stuck.
    """

    def __init__(self, folder: Path, rank: int, world_size: int, timeout_s: float,
                 current: Callable, on_hang: Callable[[str], None]):
        self.folder, self.rank, self.world_size = Path(folder), rank, world_size
        self.timeout_s = float(timeout_s)
        self.current, self.on_hang = current, on_hang
        self.progress = Progress(rank=rank, pid=os.getpid())
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._seen_rows, self._seen_drops, self._last_change = 0, 0, time.monotonic()
        #: the last recorder seen recording (its rows outlive it: what a stopped rank can still save)
        self.recorder = None

    def __enter__(self):
        self._thread = threading.Thread(target=self._loop, name="dmlprof-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._observe(time.monotonic())
        self.progress.finished = True
        self._write()
        return False

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            self.check(time.monotonic())

    def check(self, now: float) -> bool:
        """Update the heartbeat; True (after calling ``on_hang``) when stuck at a collective."""
        self._observe(now)
        self._write()
        stuck = (self.progress.last_phase == COMM_PHASE and now - self._last_change >= self.timeout_s)
        if stuck:
            self._stop.set()
            self.on_hang(self.describe_hang(now))
        return stuck

    def _observe(self, now: float) -> None:
        recorder = self.current()
        if recorder is None:
            recorder = self.recorder  # between recordings, or after the last: nothing new
        elif recorder is not self.recorder:  # a new recording (the structure step, then the measured steps)
            self.recorder, self._seen_rows, self._seen_drops = recorder, 0, recorder.drops
        rows = recorder.rows if recorder is not None else []
        count = len(rows)
        drops = recorder.drops if recorder is not None else self._seen_drops
        if drops != self._seen_drops:
            # the rows were dropped (a script's warm-up): count what is kept, as every rank does. Told by the
            # recorder's drop count, not by the rows shrinking: they may have grown past the old count since
            self._seen_rows, self._seen_drops, self.progress.collectives = 0, drops, 0
        if count != self._seen_rows:
            for row in rows[self._seen_rows:count]:
                if row[1] == COMM_PHASE:
                    self.progress.collectives += 1
            step, phase, func = rows[count - 1][:3]
            self.progress.calls += count - self._seen_rows
            self.progress.step, self.progress.last_phase = int(step), str(phase)
            self.progress.last_op = _op_name(func)
            self._seen_rows, self._last_change = count, now
        self.progress.idle_s = round(now - self._last_change, 1)

    def describe_hang(self, now: float) -> str:
        """One line that starts with the rank to blame."""
        me = self.progress
        where = f"collective #{me.collectives} ({me.last_op}, step {me.step})"
        waited = f"rank {self.rank} waited {now - self._last_change:.0f} s"
        culprits, why = blame(me, read_peers(self.folder, self.world_size, self.rank))
        if culprits:
            names = ", ".join(map(str, culprits))
            return f"rank{'s' if len(culprits) > 1 else ''} {names} never reached {where}: {waited} there ({why})"
        return (f"rank {self.rank} hung at {where}: {waited} with no reply, and every rank got there "
                "(they disagree on the collective: its op, size or group)")

    def _write(self) -> None:
        path = progress_path(self.folder, self.rank)
        self.progress.written_at = time.time()
        try:
            write_atomic(path, json.dumps(vars(self.progress)))
        except OSError:
            pass  # a heartbeat is advice; never let it stop the run


def _op_name(func) -> str:
    from dmlprof.record.frame import op_name

    try:
        return op_name(func)
    except AttributeError:
        return str(func)


def end_process(code: int = EXIT_HUNG) -> None:
    """Leave now, from any thread: the main thread is blocked in C++ and cannot unwind. (The real ``os._exit``: the
    scan traps the scanned code's, and this is dmlprof's own way out, not the script's.)"""
    sys.stdout.flush()
    sys.stderr.flush()
    REAL_OS_EXIT(code)
