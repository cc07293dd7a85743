"""A channels-last tensor asked of DirectML: the prediction and the emulated device say what real torch-directml did.

GIVEN tests/fixtures/channels_last_calls.py: 32 ways to ask for a channels-last tensor on the device (a dtype change
      with memory_format=, model.to(memory_format=...) before and after the move, clone/empty_like/zeros_like,
      contiguous(memory_format=...)), each with what real torch-directml 0.2.5 did on realdml (MEASURED)
WHEN  its model is scanned with --target dml (the stand-in) and --device emulated-dml
THEN  each call raises or runs as it did there, but the two KNOWN differences (its cause written beside it), and a
      contiguous device tensor asked to be channels-last comes back as it is, as torch-directml's tensors answer.
tests/realdml/test_channels_last_on_real_directml.py holds the same calls against the real thing itself.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.live, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CALLS = REPO / "tests" / "fixtures" / "channels_last_calls.py"


def calls_module():
    spec = importlib.util.spec_from_file_location("channels_last_calls", CALLS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verdicts(output: str) -> dict:
    """Each call's verdict (runs / raises) from the last VERDICTS line a run printed (a scan's recorded step)."""
    lines = [line for line in output.splitlines() if line.startswith("VERDICTS ")]
    assert lines, output[-2000:]
    return {name: said.split(":")[0] for name, said in json.loads(lines[-1][len("VERDICTS "):]).items()}


def scan_calls(path_args: list, out_dir: Path, env=None) -> dict:
    done = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(CALLS), *path_args, "--steps", "1",
                           "--warmup", "0", "--quiet", "--no-profiler", "--out", str(out_dir)],
                          capture_output=True, text=True, cwd=REPO, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return verdicts(done.stdout)


@pytest.mark.parametrize("path", [["--target", "dml"], ["--device", "emulated-dml"]], ids=["predicted", "emulated"])
def test_each_channels_last_call_raises_or_runs_as_on_real_directml(path, tmp_path):
    calls = calls_module()
    said = scan_calls(path, tmp_path)
    expected = {**calls.MEASURED, **calls.KNOWN}
    assert said == expected, {name: (said.get(name), want) for name, want in expected.items() if said.get(name) != want}


def test_a_contiguous_tensor_made_channels_last_on_the_emulated_device_is_left_as_it_is_and_a_copy_raises():
    import torch

    from dmlprof import testing

    if testing.build_problem():
        pytest.fail(f"the emulated DML device must build here: {testing.build_problem()}")
    device = testing.device()
    x = torch.randn(2, 3, 4, 5).to(device)
    same = x.contiguous(memory_format=torch.channels_last)
    assert same is x and same.stride() == (60, 20, 5, 1)
    with pytest.raises(RuntimeError, match="must be Contiguous for DML tensors"):
        x.clone(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError, match="must be Contiguous for DML tensors"):
        x.transpose(2, 3).contiguous(memory_format=torch.channels_last)
    moved = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last).to(device)  # made on the CPU: runs
    assert moved.stride() == (60, 1, 15, 3)
    assert torch.equal(moved.contiguous().cpu(), moved.cpu().contiguous())
