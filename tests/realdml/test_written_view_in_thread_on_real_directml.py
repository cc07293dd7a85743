"""Re-probe 17, case 6, on real torch-directml: a write into an offset view made in a worker thread's forward and
backpropagated by the main thread misplaces the gradient there as in the main thread (CPU [-7.634, -19.91], DirectML
[-4.565, -16.841]), and the live recorder (as in ``scan --device dml``, whose views report offset 0) flags it: the
worker thread's views are noted (their offsets) and its write watched (dmlprof.record.thread_writes)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.realdml

PROBE = '''
import json, threading, torch, torch_directml
from dmlprof.backends import resolve_backend
from dmlprof.record.recorder import Recorder


def step(dev):
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8).to(dev)
    x = torch.arange(16.).view(2, 8).to(dev).requires_grad_()
    box = {}

    def forward():
        h = lin(x)
        out = torch.zeros(2, 8, device=dev)
        out[:, 2:] = h[:, :6]
        box["out"] = out
    worker = threading.Thread(target=forward)
    worker.start()
    worker.join()
    (box["out"] * torch.arange(16.).view(2, 8).to(dev)).sum().backward()
    return [round(v, 3) for v in x.grad.sum(1).cpu().tolist()]


d = torch_directml.device()
recorder = Recorder(resolve_backend("dml"), sync=False)
with recorder:
    recorded = step(d)
written = [[row[2]._schema.name, json.loads(row[-1])] for row in recorder.rows if "view_offset" in (row[-1] or "")]
print(json.dumps({"cpu": step("cpu"), "dml": step(d), "recorded": recorded, "written": written}))
'''


def test_a_worker_threads_write_is_wrong_on_directml_and_flagged_by_the_live_recorder(realdml):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=realdml, timeout=600)
    assert done.returncode == 0, done.stderr[-800:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cpu"] == [-7.634, -19.91] and found["dml"] == [-4.565, -16.841]  # wrong on the real thing
    assert found["recorded"] == found["dml"]  # the watch changes nothing
    assert found["written"] == [["aten::copy_", {"autograd_records": True, "backward_runs": True, "view_offset": 2}]]
