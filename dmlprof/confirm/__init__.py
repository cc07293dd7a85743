"""``scan --target dml --confirm``: the predicted step's calls replayed on real torch-directml.

The prediction keeps every distinct call signature of its step (:mod:`dmlprof.confirm.signatures`); each
is replayed on real torch-directml (realdml on Linux, a DirectML adapter on Windows) in worker processes
(:mod:`dmlprof.confirm.worker`) run under the truth generator's rules (:mod:`dmlprof.confirm.supervisor`:
a worker is started afresh after an abort or a failed health probe, and a call that ended a worker after
others ran there is replayed alone before it is called an abort). Each row of the result says what the
prediction said, what the real device did, and whether the two agree
(:class:`dmlprof.report.confirmation.Confirmation`).
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from dmlprof.errors import DeviceError

#: seconds a worker may stay silent (one call, shaders compiled cold on a software adapter) before it is ended
SILENCE_LIMIT_S = 600.0


class ConfirmUnavailable(DeviceError):
    """Real torch-directml cannot run here, so nothing can be confirmed."""


def real_directml_missing() -> Optional[str]:
    """Why real torch-directml cannot run in this Python here, or None (asked in a child process)."""
    from dmlprof.backends.dml import DmlBackend

    found = DmlBackend.availability()
    return None if found.available else found.reason


def require_real_directml() -> None:
    missing = real_directml_missing()
    if missing:
        raise ConfirmUnavailable(f"--confirm replays the predicted calls on real torch-directml, which cannot run "
                                 f"here: {missing}",
                                 remedy="run it where torch-directml sees an adapter (Windows, WSL2, or realdml on "
                                        "Linux: . ~/.cache/realdml/env.sh; docs/realdml.md)")


class Worker:
    """One worker process (``python -m dmlprof.confirm.worker``) over a batch of signature keys; its events."""

    def __init__(self, keys: list, env: dict, order: str, files: tuple):
        # inside the replay's folder, which its finally removes: a replay stopped by a signal (SIGTERM) or an error
        # leaves no worker's folder behind (exit_status, which removes it too, is never reached then)
        self.folder = Path(tempfile.mkdtemp(prefix="worker-", dir=str(Path(files[0]).parent)))
        keys_file = self.folder / "keys.txt"
        keys_file.write_text("\n".join(keys) + "\n", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dmlprof.confirm.worker", str(files[0]), str(files[1]), str(keys_file)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.stderr_tail = ""
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.stderr_reader.start()

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr_tail = (self.stderr_tail + line.decode("utf-8", "replace"))[-20000:]

    def events(self):
        while True:
            try:
                line = self.lines.get(timeout=SILENCE_LIMIT_S)
            except queue.Empty:
                self.process.kill()
                yield {"silent": True}
                return
            if line is None:
                return
            try:
                yield json.loads(line)
            except ValueError:
                continue

    def exit_status(self) -> str:
        code = self.process.wait()
        self.stderr_reader.join(timeout=5)
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)
        if code < 0:
            import signal

            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        return f"exit {code}"


def replay(capture, log=None) -> tuple:
    """(results by signature key, the adapter's name, workers started, seconds): every signature ``capture``
    kept, replayed on real torch-directml."""
    from dmlprof.confirm.supervisor import Supervisor

    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="dmlprof-confirm-"))
    try:
        files = capture.save(folder)
        keys = [row["key"] for row in capture.rows()]
        env = dict(os.environ)
        repo = str(Path(__file__).resolve().parents[2])  # the worker imports this dmlprof, wherever it runs from
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH")]))
        supervisor = Supervisor(lambda batch, env, order: Worker(batch, env, order, files), env,
                                log or (lambda line: None))
        results = supervisor.measure(keys)
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return results, supervisor.adapter, supervisor.workers_started, time.monotonic() - started


def confirm(session, capture, model: str = "", log=None):
    """The :class:`~dmlprof.report.confirmation.Confirmation` of a predicted ``session`` whose calls ``capture``
    kept: each signature's prediction against what real torch-directml did."""
    from dmlprof.confirm.judge import confirmation

    results, adapter, workers, seconds = replay(capture, log)
    return confirmation(session, capture, results, adapter, workers, seconds, model)
