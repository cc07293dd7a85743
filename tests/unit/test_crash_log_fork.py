"""The scanned process's crash log is its own: a child it forks dies without writing there (re-probe 22, case 22:
the salvage named the forked child's crashing line for the parent's later death)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FORK_THEN_DIE = """
import ctypes, os, sys
from dmlprof import survival
survival.in_child()
pid = os.fork()
if pid == 0:
    ctypes.string_at(1)  # the child dies of SIGSEGV: CHILD LINE
os.waitpid(pid, 0)
ctypes.string_at(1)  # then the scanned process dies: PARENT LINE
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on Windows")
def test_a_forked_childs_native_crash_is_not_taken_for_the_scanned_processs(tmp_path):
    from dmlprof.salvage import crash_location
    from dmlprof.survival import CHILD_ENV, CRASH_LOG_ENV, JOURNAL_ENV

    script = tmp_path / "forking.py"
    script.write_text(FORK_THEN_DIE, encoding="utf-8")
    crash_log = tmp_path / "crash.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), CHILD_ENV: "1", CRASH_LOG_ENV: str(crash_log),
           JOURNAL_ENV: str(tmp_path / "calls.journal")}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=120)
    assert done.returncode != 0
    lines = script.read_text(encoding="utf-8").splitlines()
    parent_line = next(n for n, text in enumerate(lines, 1) if "PARENT LINE" in text)
    assert crash_location(crash_log).endswith(f"forking.py:{parent_line}")
    assert crash_log.read_text(encoding="utf-8", errors="replace").count("Segmentation fault") == 1
