"""nn.RReLU in training on real torch-directml (re-probe 21, case 27): rrelu_with_noise falls back, and the fallback
(torch 2.4.1's cpu_fallback, whose schema leaves ``noise`` unmarked) never writes the slopes it drew into ``noise``,
so the input's gradient is not the slope the forward applied. The wrong-result class holds exactly where the real
thing is wrong (training with the input's gradient taken; not in evaluation), and each fix the class offers gives
the CPU's gradient there."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from dmlprof.directml.call_arguments import call_arguments
from dmlprof.tables.wrong_classes import CLASSES, Call, classes_for

pytestmark = pytest.mark.realdml

#: each case's forward, run on real torch-directml and on the CPU: (name, expression of x)
CASES = {
    "rrelu training": "nn.RReLU(0.1, 0.3).train()(x)",
    "rrelu training in place": "nn.RReLU(0.1, 0.3, inplace=True).train()(x * 1)",
    "rrelu evaluation": "nn.RReLU(0.1, 0.3).eval()(x)",
    "fix: leaky relu of the mean slope": "nn.LeakyReLU((0.1 + 0.3) / 2)(x)",
    "fix: slopes drawn on the device": "torch.where(x >= 0, x, x * torch.empty_like(x).uniform_(0.1, 0.3))",
    "fix: rrelu on the cpu": "nn.RReLU(0.1, 0.3).train()(x.cpu()).to(x.device)",
}

PROBE = '''
import json, sys, torch
from torch import nn
import torch_directml
d = torch_directml.device()
found = {}
for name, expression in json.loads(sys.argv[1]).items():  # one case: the noise is whatever its memory held, and a
    torch.manual_seed(0)                                  # block freed by an earlier case may hold that case's slopes
    x = (torch.rand(64) * 2 - 1.5).to(d).requires_grad_()  # mostly negative: the slopes matter
    out = eval(expression)
    out.sum().backward()
    slope = torch.where(x.detach() >= 0, torch.ones(()).to(d), out.detach() / x.detach())  # what the forward applied
    found[name] = float((x.grad - slope).abs().max().cpu())
print(json.dumps(found))
'''


def _flagged(expression: str) -> bool:
    """Whether the class flags the rrelu_with_noise calls of this forward, recorded on the CPU."""
    from torch import nn  # noqa: F401 (the expressions name it)
    from torch.utils._python_dispatch import TorchDispatchMode

    flagged = []

    class Judge(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = f"aten::{func._schema.name.split('::', 1)[-1]}" + (
                f".{func._overloadname}" if func._overloadname != "default" else "")
            text = call_arguments(func, args, kwargs or {})
            if "rrelu" in name and text:
                flagged.append(bool(classes_for(Call(name, ("float32",), (tuple(args[0].shape),), "forward",
                                                     json.loads(text)))))
            return func(*args, **(kwargs or {}))

    x = (torch.rand(64) * 2 - 1.5).requires_grad_()
    with Judge():
        eval(expression)
    return any(flagged)


def test_rrelus_class_holds_where_real_directml_loses_the_slopes_and_its_fixes_are_right(realdml):
    errors = {}
    for name, expression in CASES.items():  # each in a process of its own (PROBE)
        done = subprocess.run([sys.executable, "-c", PROBE, json.dumps({name: expression})], capture_output=True,
                              text=True, env=realdml, timeout=300)
        assert done.returncode == 0, done.stderr[-800:]
        errors.update(json.loads(done.stdout.strip().splitlines()[-1]))
    for name, expression in CASES.items():
        wrong = errors[name] > 1e-4
        assert wrong == name.startswith("rrelu training"), (name, errors[name])
        if "on the cpu" not in name:  # (a CPU call is no device call: the recorder never judges it)
            assert _flagged(expression) == wrong, name
    fix = next(c.fix for c in CLASSES if "aten::rrelu_with_noise" in c.ops)
    assert "nn.LeakyReLU((lower + upper) / 2)" in fix and "uniform_(lower, upper)" in fix and "x.cpu()" in fix
