"""Re-probe 17, case 6, end to end: a write into an offset view made in a worker thread's forward, backpropagated by
the main thread (real DirectML's gradient is wrong there), fails ``check --target dml --from cuda`` as the same
write in the main thread does, and a scan that dies after that backward keeps the finding in its salvaged session.

GIVEN docs/probe17/written_view_in_worker_thread.py (its forward in a thread; ``-- same``: in the main thread)
WHEN  ``dmlprof check`` runs it on the emulated DirectML device, mapped from CUDA
THEN  it fails (exit 6) naming aten::copy_ at the write's line, and its numbers are the unscanned run's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.live
SCRIPT = REPO / "docs" / "probe17" / "written_view_in_worker_thread.py"
WRITE_LINE = 32


def _check(tmp_path, script, *script_args):
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "dmlprof", "check", str(script), "--target", "dml", "--from", "cuda",
                           "--no-progress", "--json", str(tmp_path / "r.json"), "--out", str(tmp_path / "out"),
                           *(["--", *script_args] if script_args else [])],
                          cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8", timeout=600)


def _wrong(tmp_path) -> list:
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    return [(k["op"], [source.rsplit("/", 1)[-1] for source in k["sources"]]) for k in report["known_wrong_results"]]


def test_a_write_in_a_worker_threads_forward_fails_the_check_at_its_line(tmp_path):
    result = _check(tmp_path, SCRIPT)
    assert result.returncode == 6, result.stderr
    assert "grad [-7.634, -19.91]" in result.stdout  # as unscanned: the watch changes nothing
    assert _wrong(tmp_path) == [("aten::copy_", [f"written_view_in_worker_thread.py:{WRITE_LINE}"])]


@pytest.mark.skipif(sys.platform == "win32", reason="crashes through ctypes.string_at(0)")
def test_a_scan_that_dies_after_the_backward_keeps_the_threads_finding(tmp_path):
    crashing = tmp_path / "crashing.py"
    crashing.write_text(SCRIPT.read_text(encoding="utf-8") + "import ctypes\nctypes.string_at(0)\n", encoding="utf-8")
    result = _check(tmp_path, crashing)
    assert result.returncode == 7 and "died of SIGSEGV" in result.stderr, result.stderr
    assert _wrong(tmp_path) == [("aten::copy_", [f"crashing.py:{WRITE_LINE}"])]
