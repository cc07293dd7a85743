"""native_dropout's mask on real torch-directml and on the emulated device (re-probe 17, 31): the same facts, each
in a process of its own. torch-directml returns the mask in the input's dtype (0 and 1; float32 and float16, train
or not), so ``x[mask]`` raises IndexError; F.dropout and nn.Dropout take native_dropout's output, and its backward
takes the float mask. The emulated device kept the CPU's bool mask, and the same script passed there."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.realdml

PROBE = '''
import json, sys, torch
import torch.nn.functional as F
if sys.argv[1] == "real":
    import torch_directml
    d = torch_directml.device()
else:
    from dmlprof import testing
    d = testing.device()
torch.manual_seed(0)
facts = {}
for dtype in (torch.float32, torch.float16):
    x = torch.randn(4, 8).to(dtype).to(d)
    for train in (True, False):
        out, mask = torch.native_dropout(x, 0.5, train)
        m = mask.cpu()
        scaled = x.cpu().float() * m.float() * (2.0 if train else 1.0)
        facts[f"{dtype} {train}"] = [str(mask.dtype), sorted(set(m.float().flatten().tolist())) if not train else
                                     set(m.float().flatten().tolist()) <= {0.0, 1.0},
                                     bool(torch.allclose(out.cpu().float(), scaled))]
try:
    x[torch.native_dropout(x, 0.5, True)[1]]
    facts["index"] = "ran"
except Exception as exc:
    facts["index"] = type(exc).__name__ + ": " + str(exc).splitlines()[0]
x = torch.randn(4, 8).to(d).requires_grad_()
y = F.dropout(x, 0.5, True)
y.sum().backward()
facts["F.dropout"] = [str(y.dtype), type(y.grad_fn).__name__, bool(torch.equal(x.grad.cpu(), (y.cpu() != 0).float() * 2))]
layer = torch.nn.Dropout(0.5)
z = layer(x)
facts["nn.Dropout"] = bool(((z.cpu() == 0) | torch.isclose(z.detach().cpu(), 2 * x.detach().cpu())).all())
layer.eval()
facts["eval"] = bool(torch.equal(layer(x).detach().cpu(), x.detach().cpu()))
print(json.dumps(facts))
'''


def _facts(where: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, where], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-800:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_emulated_devices_dropout_mask_is_torch_directmls(realdml):
    real = _facts("real", realdml)
    assert real["torch.float32 True"][0] == "torch.float32" and real["torch.float16 False"][0] == "torch.float16"
    assert real["index"].startswith("IndexError: tensors used as indices must be long, int, byte or bool tensors")
    emulated = _facts("emulated", dict(os.environ, PYTHONPATH=realdml["PYTHONPATH"]))
    assert emulated == real
