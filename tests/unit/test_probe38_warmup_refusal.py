"""A refusal caught in a warm-up step whose retake runs clean (a capability check done once) still ends the run."""
from __future__ import annotations

import pytest

CHECKS_FFT_ONCE = """\
import torch
from torch import nn

BATCH_SIZE = 4


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.use_fft = None

    def forward(self, x):
        if self.use_fft is None:  # asked once, at the first forward: the answer is kept
            try:
                torch.fft.rfft(x)
                self.use_fft = True
            except RuntimeError:
                self.use_fft = False
        return self.fc(x)


def build_model():
    return Spectral()


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randn(batch_size, 2)
"""


def test_a_refusal_caught_only_in_the_warm_up_step_still_ends_the_run_with_exit_4(tmp_path, emulated_dml_backend):
    """On DirectML the process ends at the first forward's FFT; the model caught the emulated device's error in
    warm-up and remembered "no FFT", so the recorded retake ran clean: rc 0, "every call ran on the device"."""
    from dmlprof import runner

    model = tmp_path / "checks_fft_once.py"
    model.write_text(CHECKS_FFT_ONCE, encoding="utf-8")
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(model, backend=emulated_dml_backend, profiler=False, warmup=1, steps=2)
    assert stopped.value.exit_code == 4
    assert "ends the process" in str(stopped.value) and "caught" in str(stopped.value)
    assert "ends the process" in (stopped.value.session.meta.partial_reason or "")  # the saved session says so
    failure = stopped.value.session.meta.device_failure  # the report and a target's verdict lead with it
    assert failure is not None and failure.kind == "aborts" and failure.source.endswith("checks_fft_once.py:16")
