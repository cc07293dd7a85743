"""A scan that survives its process's death: a native crash anywhere ends with the report of what was
recorded, one error line naming the signal and the call, the partial session, and exit 7.

GIVEN a model or script that crashes natively (here through ctypes: the user's own native code; on real
      DirectML, tests/realdml/test_survival.py has torch-directml's own crashes)
WHEN  ``dmlprof scan`` (or ``check``) runs it
THEN  dmlprof's own process, the parent, finishes the scan from the child's journal.
"""
from __future__ import annotations

import json
import sys

import pytest
import torch

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow]
POSIX_CRASH = pytest.mark.skipif(sys.platform == "win32", reason="crashes through ctypes.string_at(0)")

CRASHING_MODEL = '''
import ctypes
import torch
from torch import nn

STEPS_BEFORE_CRASH = {steps}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = self.fc(x).relu()
        if self.calls > STEPS_BEFORE_CRASH:
            ctypes.string_at(0)  # the model's own native code dereferences NULL
        return y


def build_model():
    return Net()


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 4, (batch_size,))
'''


def _sessions(folder):
    return sorted(folder.glob("*.session.json"))


@POSIX_CRASH
def test_a_model_that_segfaults_mid_step_keeps_the_steps_recorded_before_it(tmp_path):
    (tmp_path / "net.py").write_text(CRASHING_MODEL.format(steps=2), encoding="utf-8")  # warm-up + 1 step
    done = run_cli("scan", "net.py", "--device", "cpu", "--steps", "3", "--json", "report.json", cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    (error,) = done.stderr.strip().splitlines()
    assert error.startswith("dmlprof: error: the scanned process died of SIGSEGV at net.py:19")
    assert "[partial session saved to reports" in error
    assert "PARTIAL SESSION  The run stopped early: the scanned process died of SIGSEGV" in done.stdout
    (path,) = _sessions(tmp_path / "reports")
    session = json.loads(path.read_text(encoding="utf-8"))
    assert session["meta"]["partial"] is True
    ops = session["ops"]
    # the first measured step whole (its forward, backward and optimizer), and the second's forward up to the crash
    assert ops["step"].count(0) > 10 and set(ops["phase"]) >= {"forward", "backward", "optimizer"}
    assert ops["op"][ops["step"].index(1)] == "aten::t"  # the second step's first call is in it too
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["meta"]["partial_reason"].startswith("the scanned process died of SIGSEGV")


@POSIX_CRASH
def test_a_crash_before_anything_was_recorded_is_one_line_and_no_session(tmp_path):
    (tmp_path / "net.py").write_text(CRASHING_MODEL.format(steps=0), encoding="utf-8")  # in the warm-up
    done = run_cli("scan", "net.py", "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert done.stderr.strip().splitlines() == [
        "dmlprof: error: the scanned process died of SIGSEGV at net.py:19, between op calls (native code the script "
        "called), before the recording began [nothing was recorded]"]
    assert not _sessions(tmp_path / "reports")


SCRIPT_THAT_CRASHES_AFTER_TRAINING = '''
import ctypes
import torch
from torch import nn

model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = model(torch.randn(4, 8)).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    model(torch.randn(4, 8))
    ctypes.string_at(0)  # the evaluation's native code crashes, after the recorded window
'''


@POSIX_CRASH
def test_run_to_end_a_crash_after_the_recorded_window_keeps_the_recording(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT_THAT_CRASHES_AFTER_TRAINING, encoding="utf-8")
    done = run_cli("scan", "train.py", "--device", "cpu", "--run-to-end", cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert "died of SIGSEGV at train.py:15" in done.stderr
    (path,) = _sessions(tmp_path / "reports")
    ops = json.loads(path.read_text(encoding="utf-8"))["ops"]
    assert "aten::addmm" in ops["op"] and "optimizer" in ops["phase"]


@POSIX_CRASH
def test_check_of_a_crashing_model_writes_its_junit_case_in_error(tmp_path):
    (tmp_path / "net.py").write_text(CRASHING_MODEL.format(steps=2), encoding="utf-8")
    done = run_cli("check", "net.py", "--device", "emulated-dml", "--junit", "junit.xml", cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert "died of SIGSEGV" in done.stderr.strip().splitlines()[-1]
    junit = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert "<error" in junit and "died of SIGSEGV" in junit


@pytest.mark.live
def test_no_truth_sample_computes_otherwise_under_the_recorder_on_the_emulated_device(tmp_path):
    # plainly and under the recorder, the whole truth table (the tap's kernels are registered once a process:
    # 4,922 samples in 113 s on torch 2.13, 4,729 in 155 s on 2.4.1; registered for each sample, 2.4.1 took 8.5 min
    # and only one sample of every op ran here); the real-DirectML lane runs the writing ops and one sample of every
    # op (tests/realdml/test_survival.py)
    import subprocess
    from pathlib import Path

    tool = Path(__file__).resolve().parents[2] / "tools" / "realdml" / "transparency.py"
    report = tmp_path / "transparency.json"
    done = subprocess.run([sys.executable, str(tool), "--device", "emulated-dml", "--json", str(report)],
                          capture_output=True, text=True, timeout=1500)
    summary = json.loads(report.read_text(encoding="utf-8"))["summary"]
    assert done.returncode == 0 and summary.get("differs", 0) == 0, done.stdout[-3000:]
    assert summary["samples"] >= 4000 and summary["same"] >= summary["samples"] // 2, summary


REMOVES_ITS_TEMPORARY_FOLDER = '''
import ctypes, glob, os, shutil, tempfile
import torch

model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    if step == 2:  # the script's own clean-up of TMPDIR, then its own native crash
        for folder in glob.glob(os.path.join(tempfile.gettempdir(), "*")):
            shutil.rmtree(folder, ignore_errors=True)
        ctypes.string_at(0)
'''


@POSIX_CRASH
def test_a_script_that_removes_the_temporary_folder_then_crashes_keeps_its_recording(tmp_path):
    """The journal's folder removed by the script: the crash read 'died ..., before the recording began [nothing was
    recorded]' and the steps recorded were lost. The supervisor holds the files open and puts them back."""
    (tmp_path / "cleans.py").write_text(REMOVES_ITS_TEMPORARY_FOLDER, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    done = run_cli("scan", "cleans.py", "--device", "cpu", "--steps", "5", "--no-profiler", "--out", "out",
                   cwd=tmp_path, env={"TMPDIR": str(tmp_path / "tmp")})
    assert done.returncode == 7, done.stderr
    assert "before the recording began" not in done.stderr and "cleans.py:14" in done.stderr
    session = json.loads(_sessions(tmp_path / "out")[0].read_text(encoding="utf-8"))
    assert "aten::addmm" in session["ops"]["op"]
