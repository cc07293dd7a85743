"""The emulated device's build: who builds it, and why a build failed, in a line.

Who builds it: a lock that names its holder, so a build killed mid-way (SIGKILL, a
closed laptop) is noticed at once by the next one instead of leaving it waiting.

torch.utils.cpp_extension guards each build with ``build_dir/lock`` (its FileBaton) and waits, without
limit, while that file exists; a build killed mid-way never removes it, and the file says nothing of
who made it. Every dmlprof build therefore first takes this lock, which holds its pid and host: a waiter
whose holder is gone takes the lock over, and with it torch's lock, which that dead build left.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Optional

from dmlprof.files import process_alive

LOCK_NAME = "dmlprof-build.lock"
#: torch's FileBaton
TORCH_LOCK_NAME = "lock"
#: a lock file with no holder written yet is given this long before it counts as abandoned
UNWRITTEN_GRACE_S = 10.0


def _holder(path: Path) -> Optional[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def _abandoned(path: Path) -> bool:
    """Whether the lock at ``path`` was left by a process that is gone."""
    holder = _holder(path)
    if holder is None:  # being written, or its writer died before writing
        try:
            return time.time() - path.stat().st_mtime > UNWRITTEN_GRACE_S
        except OSError:
            return False
    if holder.get("host") != socket.gethostname():  # another machine's (a shared folder): cannot be told
        return False
    return process_alive(holder["pid"]) is False


@contextmanager
def build_lock(build_dir: Path, *, poll_s: float = 0.2, waiting: Optional[Callable[[dict], None]] = None):
    """Hold the build lock of ``build_dir`` for the block, waiting while a live process holds it; clears
    torch's lock when it was left by a dead build. ``waiting(holder)`` is told once when the wait starts."""
    path = Path(build_dir) / LOCK_NAME
    told = took_over = False
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _abandoned(path):
                try:
                    path.unlink()
                    took_over = True
                except OSError:  # another waiter took it over first
                    pass
                continue
            if not told and waiting is not None:
                waiting(_holder(path) or {})
                told = True
            time.sleep(poll_s)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        break
    try:
        if took_over:  # its holder died mid-build: torch's lock, if there, is that build's
            _remove(Path(build_dir) / TORCH_LOCK_NAME)
        else:
            clear_stale_torch_lock(Path(build_dir))
        yield
    finally:
        try:
            path.unlink()
        except OSError:
            pass


#: a torch lock with no dead holder named (left by a dmlprof from before this lock, whose build folder has the
#: same name when the C++ sources are the same) counts as abandoned once the folder was quiet this long
STALE_LOCK_S = 600


def clear_stale_torch_lock(build_dir: Path) -> None:
    """Remove torch's lock when nothing in the folder changed for :data:`STALE_LOCK_S` (a build takes minutes)."""
    lock = build_dir / TORCH_LOCK_NAME
    try:
        newest = max(entry.stat().st_mtime for entry in build_dir.iterdir())
    except (OSError, ValueError):  # no folder, or an empty one: nothing to clear
        return
    if lock.exists() and time.time() - newest > STALE_LOCK_S:
        _remove(lock)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:  # another process removed it first
        pass


#: lines of a compiler's or ninja's output that say why a build stopped
_CAUSE = re.compile(r"fatal error|error:|killed|terminated|no space left|out of memory|virtual memory exhausted"
                    r"|cannot allocate|segmentation fault|internal compiler error", re.IGNORECASE)
#: lines that are the build's own progress or commands (long, and cut off in a one-line error), not a cause
_NOT_A_CAUSE = re.compile(r"^(\[\d+/\d+\]|FAILED:|ninja: |Error building extension)|\s-c\s|\s-o\s")


def build_failure(exc: BaseException) -> str:
    """Why building the extension failed, in one line: the compiler's own words where it gave any (``c++: fatal
    error: Killed signal terminated program cc1plus``), else how the build ended (killed by a signal) --
    never the compile command, which a one-line error cuts off before it says anything."""
    text = str(exc)
    if not text.startswith("Error building extension"):  # not the compiler's output: its first line says it
        return (text.strip().splitlines() or [type(exc).__name__])[0][:300]
    lines = [line.strip() for line in text.splitlines()]
    causes = [line for line in lines if line and _CAUSE.search(line) and not _NOT_A_CAUSE.search(line)]
    if causes:
        return causes[0][:300]
    code = getattr(exc.__cause__, "returncode", None)
    if isinstance(code, int) and code < 0:
        try:
            return f"the build was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the build was killed by signal {-code}"
    return ("the compiler stopped without saying why (killed, or out of memory?)"
            + (f"; the build exited with status {code}" if isinstance(code, int) else ""))
