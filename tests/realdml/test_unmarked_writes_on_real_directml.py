"""Arguments a CPU kernel writes that the op's schema leaves unmarked, on real torch-directml and on the emulated device
(re-probe 20, 4): the same facts, each in a process of its own (tests/fixtures/unmarked_writes_probe.py).
torch-directml's own native_batch_norm updates BatchNorm's running statistics as the CPU does (momentum=None's
cumulative average, statistics that are every other element of a buffer, an evaluation after training);
batch_norm_update_stats reaches its CPU fallback, which loses them, as it loses rrelu_with_noise's noise (so F.rrelu's
gradient in training is not its slope on torch-directml). The emulated device never updated the statistics."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.realdml

PROBE = Path(__file__).resolve().parents[1] / "fixtures" / "unmarked_writes_probe.py"


def _facts(where: str, env: dict) -> dict:
    """The probe's figures, each under a key of its own (pytest.approx compares no nested lists)."""
    done = subprocess.run([sys.executable, str(PROBE), where], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-800:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {f"{key} {index}": value for key, values in found.items()
            for index, value in enumerate(values if isinstance(values, list) else [values])}


def test_the_emulated_devices_running_statistics_are_torch_directmls(realdml):
    real = _facts("real", realdml)
    on_cpu = _facts("cpu", dict(os.environ, PYTHONPATH=realdml["PYTHONPATH"]))
    # the fallback lost what the CPU kernel wrote (the noise on torch 2.4.1, whose schema leaves it unmarked)
    lost = ("batch_norm_update_stats 0", "batch_norm_update_stats 1", "rrelu_with_noise 0")
    assert [real[key] for key in lost] == [0.0, 4.0, 0.0]
    assert all(on_cpu.pop(key) not in (0.0, 4.0) for key in lost)
    assert {k: v for k, v in real.items() if k not in lost} == pytest.approx(on_cpu, rel=1e-4)
    assert real["train 0"] == pytest.approx(1.25454) and real["train 2"] == 3  # num_batches_tracked
    emulated = _facts("emulated", dict(os.environ, PYTHONPATH=realdml["PYTHONPATH"]))
    assert emulated == pytest.approx(real, rel=1e-4, abs=1e-4)
