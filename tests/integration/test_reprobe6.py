"""A fresh probe of the emulated device's abort note, the journal and the warning capture (issue 33): its defects.

GIVEN a realistic script or model file that catches the emulated device's error where DirectML's process ends
WHEN  dmlprof measures or scans it
THEN  what dmlprof says about the run is what DirectML would do.
"""
from __future__ import annotations

import json

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
