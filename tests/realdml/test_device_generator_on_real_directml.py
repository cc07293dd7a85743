"""``torch.Generator(device=<the device>)`` on real torch-directml and on the emulated device (re-probe 22, 19): the
same facts, each in a process of its own. torch-directml's is a CPU generator of initial seed 0 whose draws on the
device equal the CPU's for the same seed; the emulated device (and the prediction's stand-in) had none to give."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.realdml

PROBE = '''
import contextlib, json, sys, torch
if sys.argv[1] == "real":
    import torch_directml
    d, block = torch_directml.device(), contextlib.nullcontext()
else:
    from dmlprof import testing
    from dmlprof.directml.generators import device_generators_made
    d = testing.device()
    block = device_generators_made(d.type)
def cpu_draw(seed, n=5):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))
with block:
    g = torch.Generator(device=d)
    facts = {"device": str(g.device), "initial_seed": g.initial_seed(),
             "unseeded is seed 0": bool(torch.equal(torch.randn(5, device=d, generator=g).cpu(), cpu_draw(0)))}
    g.manual_seed(1)
    facts["seeded is the cpu's"] = bool(torch.equal(torch.randn(5, device=d, generator=g).cpu(), cpu_draw(1)))
    state = g.get_state()
    first = torch.rand(3, device=d, generator=g).cpu()
    g.set_state(state)
    facts["state"] = [str(state.dtype), list(state.shape), bool(torch.equal(first, torch.rand(3, device=d, generator=g).cpu()))]
    facts["on the cpu"] = list(torch.randn(2, generator=g).shape)
print(json.dumps(facts))
'''


def _facts(where: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, where], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-800:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_emulated_devices_generator_is_torch_directmls(realdml):
    real = _facts("real", realdml)
    assert real["device"] == "cpu" and real["initial_seed"] == 0 and real["seeded is the cpu's"]
    emulated = _facts("emulated", dict(os.environ, PYTHONPATH=realdml["PYTHONPATH"]))
    assert emulated == real
