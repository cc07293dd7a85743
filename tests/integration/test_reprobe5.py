"""A fresh probe of the journal, --confirm and the new targets (issue 33): the defects it found.

GIVEN a realistic script a user scans (DataLoader workers, torch.compile, a crash while the session is saved)
WHEN  ``dmlprof scan`` runs it
THEN  dmlprof changes nothing the script does, and what it says about the run is so.
"""
from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow]

SPAWNING_SCRIPT = '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import torch_directml

device = torch_directml.device()  # at the top, as scripts write it: a spawned worker runs this line too

if __name__ == "__main__":
    data = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn")
    model = nn.Linear(8, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, target in loader:
        loss = nn.functional.cross_entropy(model(inputs.to(device)), target.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("trained on", torch_directml.device_name())
'''


def test_a_script_whose_dataloader_spawns_workers_runs_on_the_stand_in_device_as_on_directml(tmp_path):
    # On DirectML (torch-directml installed) a spawned worker imports the script again, torch_directml with it,
    # and runs; without torch-directml installed its import failed in the worker: the scan said the script
    # failed ("DataLoader worker exited unexpectedly", exit 3) where it trains. spawn is the default on
    # Windows and macOS.
    (tmp_path / "train.py").write_text(SPAWNING_SCRIPT, encoding="utf-8")
    done = run_cli("scan", "train.py", "--target", "dml", "--run-to-end", "--no-progress", "--json", "report.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No module named 'torch_directml'" not in done.stderr
    assert "trained on" in done.stdout
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert not report["meta"].get("partial")
