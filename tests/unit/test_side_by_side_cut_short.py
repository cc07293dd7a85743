"""Re-probe 19, cases 26 and 27 (issue 33): a side-by-side run (``--target dml,xpu,mps``) that a stop signal or a
native crash ends in one target's branch.

GIVEN a model file whose MPS branch has the scan stopped (SIGTERM to dmlprof, Ctrl-C) or crashes in native code
WHEN  ``dmlprof scan --target ...`` predicts it side by side, from the command line (the scan in a supervised child)
THEN  each target is reported on its own line: the finished ones' verdicts, the running one named as stopped or
      crashed (with its partial session where its recording had begun), the ones after it not predicted; the error
      line's bracket names every session saved, and the exit code is the signal's (143, 130) or a death's (7).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dmlprof.cli import main

pytestmark = pytest.mark.live  # predictions of a model file, on torch 2.4.1 too

ROOT = Path(__file__).resolve().parents[2]


def _scan(model: str, targets: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``dmlprof scan MODEL --target TARGETS`` from the command line (supervised, as a user runs it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DMLPROF_NO_SUPERVISOR", None)
    return subprocess.run([sys.executable, "-m", "dmlprof", "scan", model, "--target", targets, "--out", str(out),
                           *extra], capture_output=True, text=True, timeout=600, env=env, cwd=str(out.parent))


def _kept_sessions(stderr: str) -> dict:
    """{target: (path, partial)} from the error line's bracket."""
    bracket = stderr.strip().splitlines()[-1].rsplit("[", 1)[1].rstrip("]")
    found = re.findall(r"(\w+) (partial )?session saved to ([^;]+)", bracket)
    return {target: (Path(path.strip()), bool(partial)) for target, partial, path in found}


@pytest.mark.parametrize("warmup, mps_kept", [("1", False), ("0", True)])
def test_a_native_crash_in_one_targets_branch_is_that_targets_line_and_the_finished_ones_keep_theirs(
        tmp_path, linear_model_file, warmup, mps_kept):
    # case 27: DirectML's report was printed headed by MPS's crash, a second DirectML session saved, no line at all
    model = linear_model_file("""
        if x.device.type == "mps":
            import ctypes
            ctypes.string_at(0)  # a Metal extension's crash
        return self.fc(x)""")
    out = tmp_path / "reports"
    done = _scan(model, "dml,mps,xpu", out, "--warmup", warmup)
    assert done.returncode == 7, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("  DirectML, torch ") and "no call fails" in line for line in lines), done.stdout
    mps = next(line for line in lines if line.startswith("  MPS: "))
    assert mps.startswith("  MPS: crashed; the scanned process died of ") and "net.py" in mps
    assert ("its partial session saved" in mps) is mps_kept
    assert "  XPU: not predicted; the run ended before it" in lines
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dmlprof: error: MPS's prediction: the scanned process died of "), last
    kept = _kept_sessions(done.stderr)
    assert kept["dml"][1] is False and kept["dml"][0].is_file()
    assert ("mps" in kept) is mps_kept and "xpu" not in kept
    assert sorted(path.name.split("-")[1] for path in out.glob("*.session.json")) == sorted(kept)  # no 2nd dml
    if mps_kept:
        assert kept["mps"][1] is True and kept["mps"][0].is_file()
    assert "PARTIAL SESSION" not in done.stdout  # no single target's report


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM to a process is POSIX")
def test_sigterm_after_two_targets_names_their_saved_sessions_and_exits_143(tmp_path, linear_model_file):
    # case 26: "stopped by SIGTERM before any step was recorded: nothing was saved", beside two saved sessions
    model = linear_model_file("""
        if x.device.type == "mps":
            import os, signal, time
            os.kill(os.getppid(), signal.SIGTERM)  # dmlprof's own process (the supervisor), as `kill` does
            time.sleep(60)
        return self.fc(x)""")
    out = tmp_path / "reports"
    done = _scan(model, "dml,xpu,mps", out)
    assert done.returncode == 143, done.stderr
    assert "nothing was saved" not in done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0].split(",")[0].strip() for line in lines[1:]] == ["DirectML", "XPU", "MPS"]
    assert lines[3] == "  MPS: cut short; stopped by SIGTERM (nothing of it was saved)"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dmlprof: error: stopped by SIGTERM while MPS was predicted, after DirectML, XPU")
    kept = _kept_sessions(done.stderr)
    assert sorted(kept) == ["dml", "xpu"] and all(path.is_file() and not partial for path, partial in kept.values())


def test_ctrl_c_in_the_first_target_keeps_its_partial_session_and_predicts_no_other(tmp_path, linear_model_file,
                                                                                    capsys):
    # in-process (no supervisor): the child's own handling of a stop, as Ctrl-C reaches it in the recorded step
    model = linear_model_file("""
        if x.device.type == "privateuseone":
            raise KeyboardInterrupt
        return self.fc(x)""")
    code = main(["scan", model, "--target", "dml,xpu", "--warmup", "0", "--out", str(tmp_path / "reports")])
    captured = capsys.readouterr()
    assert code == 130
    assert "  DirectML: cut short; interrupted (its partial session saved)" in captured.out.splitlines()
    assert "  XPU: not predicted; the run ended before it" in captured.out.splitlines()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("dmlprof: error: interrupted while DirectML was predicted [dml partial session saved to ")
