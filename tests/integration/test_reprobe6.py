"""A fresh probe of the emulated device's abort note, the journal and the warning capture (issue 33): its defects.

GIVEN a realistic script or model file that catches the emulated device's error where DirectML's process ends
WHEN  dmlprof measures or scans it
THEN  what dmlprof says about the run is what DirectML would do.
"""
from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow]

CPU_FALLBACK_AT_ONE_SIZE = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        if x.shape[0] == 4:  # a path only one batch size takes
            try:
                x = torch.fft.irfft(torch.fft.rfft(x), n=16)
            except RuntimeError:  # "the device cannot do FFTs": a CPU fallback, as scripts write it
                x = torch.fft.irfft(torch.fft.rfft(x.cpu()), n=16).to(x.device)
        return self.head(x)


def build_model():
    return Net()


def make_batch(batch_size):
    return torch.randn(batch_size, 16), torch.randint(0, 2, (batch_size,))
'''


def test_a_sweep_size_whose_model_caught_the_device_error_for_a_call_that_ends_directml_fails(tmp_path):
    # The sweep's child measured the size "ok": the model's except RuntimeError caught the emulated device's error
    # in place of the FFT and trained on; on DirectML the process ends at that call, so the size cannot run.
    (tmp_path / "net.py").write_text(CPU_FALLBACK_AT_ONE_SIZE, encoding="utf-8")
    done = run_cli("sweep", "net.py", "--batch-sizes", "2,4", "--device", "emulated-dml", "--steps", "1",
                   "--warmup", "1", "--no-progress", "--json", "sweep.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["batch_size"]: row for row in json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))["sweep"]["rows"]}
    assert rows[2]["status"] == "ok", rows[2]
    assert rows[4]["status"] == "error", rows[4]
    assert "complex" in rows[4]["error"], rows[4]


WATCHES_ITS_WARNINGS = '''
import os
import warnings

import torch

try:
    import torch_directml
    device = torch_directml.device()
except (ImportError, OSError):  # plainly, without a torch-directml that loads: the emulated device
    import dmlprof.testing
    device = dmlprof.testing.device()

model = torch.nn.Linear(8, 2).to(device)
for step in range(2):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loss = model(torch.randn(4, 8, device=device)).sum()
        warnings.warn(f"my own warning {step}", UserWarning)  # after a recorded call
        for _ in range(3):
            torch.std(torch.randn(4, 8, device=device), dim=1)  # falls back: torch warns once a process
    print("SEEN", step, sorted((str(w.message)[:40], os.path.basename(w.filename), w.lineno) for w in seen))
'''


def test_a_script_that_records_its_warnings_sees_them_under_dmlprof_as_without_it(tmp_path):
    # The capture put back in front at each recorded call kept every warning to itself: a script's
    # catch_warnings(record=True) got none, its own warning included (a test harness asserting a warning failed).
    # Then torch's warnings reached it placed on the recorder's own line (it re-runs each call), not the script's.
    import os
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(WATCHES_ITS_WARNINGS, encoding="utf-8")
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                           encoding="utf-8", timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    scanned = run_cli("scan", "train.py", "--device", "emulated-dml", "--no-progress", cwd=tmp_path)
    assert scanned.returncode == 0, scanned.stderr[-2000:]

    def seen(out):
        return [line for line in out.splitlines() if line.startswith("SEEN")]

    assert any("my own warning 0" in line for line in seen(plain.stdout)), plain.stdout
    assert seen(scanned.stdout) == seen(plain.stdout)


READS_ITS_INTERPRETER_OPTIONS = '''
import sys
import torch

try:
    assert False
    stripped = True
except AssertionError:
    stripped = False
print("options", sys.flags.optimize, sys.warnoptions, "asserts stripped" if stripped else "asserts run")
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
'''


def test_the_script_runs_with_the_interpreter_options_python_was_given(tmp_path):
    # `python -O -W error -m dmlprof scan` ran the script in a child started without -O and -W: its asserts ran
    # and its warnings were not errors, where `python -O -W error script.py` strips them and raises
    import subprocess

    (tmp_path / "opts.py").write_text(READS_ITS_INTERPRETER_OPTIONS, encoding="utf-8")
    options = ["-O", "-W", "error"]
    plain = subprocess.run([sys.executable, *options, "opts.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    scanned = subprocess.run([sys.executable, *options, "-m", "dmlprof", "scan", "opts.py", "--device", "cpu",
                              "--no-progress", "--out", "out"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=600)
    said = [line for line in plain.stdout.splitlines() if line.startswith("options")]
    assert plain.returncode == 0 and said == ["options 1 ['error'] asserts stripped"], plain.stderr[-2000:]
    assert scanned.returncode == 0, scanned.stderr[-2000:]
    assert [line for line in scanned.stdout.splitlines() if line.startswith("options")] == said
