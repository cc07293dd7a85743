"""A CPU tensor beside device tensors, call by call: real torch-directml's verdict against the prediction's stand-in
and the emulated device (re-probe 21, 15, 16, 23, 25, 26; the rule: dmlprof/directml/mixed_devices.py, measured by
tools/mixed_device_survey.py). Each call runs forward and backward; a verdict is "ran" or "refused" (an exception
with the device's words for a CPU tensor: torch-directml's assert or a same-device check). Each side runs in a
process of its own (both own the ``privateuseone`` device); a call that ends the process on torch-directml is not
among them."""
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
side = sys.argv[1]
if side == "real":
    import torch_directml
    d = torch_directml.device()
elif side == "emulated":
    from dmlprof import testing
    d = testing.device()
else:
    from dmlprof.predict.device import device_name, ensure_device
    from dmlprof.predict.standin import StandIn
    from dmlprof.tables import load_table
    ensure_device()
    StandIn(load_table("dml"), [], device_name()).install()
    d = device_name()
torch.autograd.set_multithreading_enabled(False)
def h(*shape):
    return torch.randn(*shape).to(d).requires_grad_()
cpu = lambda *shape: torch.randn(*shape)
long0 = lambda n: torch.zeros(n, dtype=torch.long)
CALLS = {
    "cross_entropy, CPU target": lambda: F.cross_entropy(h(8, 6), long0(8)),
    "nll_loss, CPU target": lambda: F.nll_loss(h(8, 6), long0(8)),
    "cat, CPU second": lambda: torch.cat([h(8, 6), cpu(8, 1)], 1),
    "stack, CPU second": lambda: torch.stack([h(6), cpu(6)]),
    "embedding, CPU indices": lambda: F.embedding(long0(8), h(6, 6)),
    "embedding, CPU weight": lambda: F.embedding(long0(8).to(d), cpu(6, 6)),
    "gather, CPU index": lambda: h(8, 6).gather(1, torch.zeros(8, 6, dtype=torch.long)),
    "index_select, CPU index": lambda: h(8, 6).index_select(0, long0(3)),
    "index, CPU indices": lambda: h(8, 6)[torch.arange(8)],
    "where, CPU other": lambda: torch.where(h(8, 6) > 0, h(8, 6), cpu(6)),
    "where, 0-d CPU other": lambda: torch.where(h(8, 6) > 0, h(8, 6), torch.tensor(-0.5)),
    "masked_fill, 0-d CPU value": lambda: h(8, 6).masked_fill(torch.ones(8, 6, dtype=torch.bool).to(d),
                                                              torch.tensor(-0.5)),
    "masked_fill, CPU mask": lambda: h(8, 6).masked_fill(torch.ones(8, 6, dtype=torch.bool), 0.5),
    "batch_norm, CPU statistics": lambda: F.batch_norm(h(8, 6), torch.zeros(6), torch.ones(6), training=True),
    "batch_norm, CPU affine": lambda: F.batch_norm(h(8, 6), None, None, cpu(6), cpu(6), training=True),
    "instance_norm, CPU statistics": lambda: F.instance_norm(h(8, 6, 3), torch.zeros(6), torch.ones(6),
                                                             use_input_stats=True),
    "layer_norm, CPU weight": lambda: F.layer_norm(h(8, 6), (6,), torch.ones(6), torch.zeros(6)),
    "prelu, CPU weight": lambda: F.prelu(h(8, 6), torch.full((1,), 0.2)),
    "mm, CPU second": lambda: h(8, 6) @ cpu(6, 6),
    "mm, CPU first": lambda: cpu(8, 6) @ h(6, 6),
    "linear, CPU weight": lambda: F.linear(h(8, 6), cpu(6, 6)),
    "linear, CPU bias": lambda: F.linear(h(8, 6), h(6, 6), cpu(6)),
    "add, CPU vector": lambda: h(8, 6) + cpu(6),
    "add, 0-d CPU": lambda: h(8, 6) + torch.tensor(2.0),
    "mul, 0-d CPU": lambda: h(8, 6) * torch.tensor(2.0),
    "mul_, CPU vector": lambda: (h(8, 6) * 1).mul_(cpu(6)),
    "clamp, 0-d CPU min": lambda: torch.clamp(h(8, 6), min=torch.tensor(-0.5)),
    "mse_loss, CPU target": lambda: F.mse_loss(h(8, 6), cpu(8, 6)),
    "copy_ from the CPU": lambda: h(8, 6) * 1 + torch.zeros(8, 6).to(d).copy_(cpu(8, 6)),
    "to the device": lambda: h(8, 6) * cpu(8, 6).to(d),
}
verdicts = {}
for name, call in CALLS.items():
    try:
        out = call()
        out.float().sum().backward()
        verdicts[name] = "ran"
    except Exception as exc:  # noqa: BLE001 - the device's refusal, said by its first line
        verdicts[name] = "refused: " + str(exc).strip().splitlines()[0][-90:]
print(json.dumps(verdicts))
'''


def _verdicts(side: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, side], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-800:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _kinds(verdicts: dict) -> dict:
    """Each call's verdict as ran, torch-directml's assert, or a same-device check (ATen's or where's words)."""
    def kind(verdict: str) -> str:
        if verdict == "ran":
            return "ran"
        if "unbox expects Dml at::Tensor as inputs" in verdict:
            return "unbox"
        return "same device" if "same device" in verdict or "respectively" in verdict else verdict
    return {name: kind(verdict) for name, verdict in verdicts.items()}


def test_the_stand_ins_take_and_refuse_cpu_tensors_as_torch_directml_does(realdml):
    real = _verdicts("real", realdml)
    assert real["cross_entropy, CPU target"].startswith("refused") and real["mm, CPU second"] == "ran"
    plain = dict(os.environ, PYTHONPATH=realdml["PYTHONPATH"])
    predicted, emulated = _verdicts("predicted", plain), _verdicts("emulated", plain)
    real = _kinds(real)
    assert _kinds(predicted) == real, {k: (real[k], predicted[k]) for k in real if real[k] != _kinds(predicted)[k]}
    assert _kinds(emulated) == real, {k: (real[k], emulated[k]) for k in real if real[k] != _kinds(emulated)[k]}
