"""A process a scanned script spawns makes tensors on the stand-in DirectML device as on DirectML (issue 33,
re-probe 6's Medium): on torch-directml every process that imports it has the device; a spawned worker under
``--device emulated-dml`` or ``--target dml`` failed with "No module named 'torch.privateuseone'"."""
from __future__ import annotations

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow]  # a scan and a spawned interpreter that loads the device: ~15 s

WORKER_ON_THE_DEVICE = '''
import multiprocessing
import torch
import torch_directml

def work(queue):
    doubled = torch.arange(4.0, device=torch_directml.device()) * 2  # the worker's own tensors on the device
    queue.put(doubled.sum().item())

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    worker = context.Process(target=work, args=(queue,))
    worker.start()
    worker.join(300)
    assert worker.exitcode == 0, f"the spawned worker failed: exit {worker.exitcode}"
    print("worker summed", queue.get(timeout=10), "on", torch_directml.device_name())
    (torch.ones(2, device=torch_directml.device()) * 3).sum().item()
'''


@pytest.mark.parametrize("device", [("--device", "emulated-dml"), ("--target", "dml")], ids=lambda d: d[1])
def test_a_spawned_worker_makes_tensors_on_the_stand_in_device(tmp_path, device):
    (tmp_path / "spawner.py").write_text(WORKER_ON_THE_DEVICE, encoding="utf-8")
    done = run_cli("scan", "spawner.py", *device, "--no-progress", "--out", "out", cwd=tmp_path)
    assert "torch.privateuseone" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "worker summed 12.0 on" in done.stdout
