"""A per-channel PReLU where real torch-directml runs it gives wrong values (re-probe 12, case 23): the wrong-result
classes of _prelu_kernel and its backward, judged by the real thing inside them and beside them (one weight; a 2-D
forward). Where it raises or ends the process is test_class_rules_on_real_directml's."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dmlprof.tables.wrong_classes import Call, classes_for

pytestmark = pytest.mark.realdml

#: (op, input shape, weight elements): calls torch-directml runs (neither raises nor aborts)
CASES = [
    ("aten::_prelu_kernel", [3, 4], 4), ("aten::_prelu_kernel", [4, 4, 4], 4), ("aten::_prelu_kernel", [1, 4, 5], 4),
    ("aten::_prelu_kernel", [4, 4, 4], 1), ("aten::_prelu_kernel", [2, 4, 3, 3], 1),
    ("aten::_prelu_kernel_backward", [4, 4], 4), ("aten::_prelu_kernel_backward", [1, 4, 5], 4),
    ("aten::_prelu_kernel_backward", [2, 4, 3, 3], 4), ("aten::_prelu_kernel_backward", [4, 4], 1),
    ("aten::_prelu_kernel_backward", [2, 4, 3, 3], 1),
]

PROBE = '''
import json, sys, torch, torch_directml
d = torch_directml.device()
torch.manual_seed(0)
found = []
for op, shape, channels in json.loads(sys.argv[1]):
    x, g = torch.randn(shape), torch.randn(shape)
    w = (torch.rand(channels) * 0.5).view([channels] + [1] * (len(shape) - 2) if channels > 1 else [1])
    if op == "aten::_prelu_kernel":
        got, want = torch.ops.aten._prelu_kernel(x.to(d), w.to(d)).cpu(), torch.ops.aten._prelu_kernel(x, w)
    else:  # the input's gradient (the weight's is reduced differently, and right)
        got = torch.ops.aten._prelu_kernel_backward(g.to(d), x.to(d), w.to(d))[0].cpu()
        want = torch.ops.aten._prelu_kernel_backward(g, x, w)[0]
    found.append(got.shape != want.shape or bool((got - want).abs().max() > 1e-4))
print(json.dumps(found))
'''


def _shapes(op: str, shape: list, channels: int) -> tuple:
    weight = (channels, *[1] * (len(shape) - 2)) if channels > 1 else (1,)
    return (tuple(shape), weight) if op == "aten::_prelu_kernel" else (tuple(shape), tuple(shape), weight)


def test_the_prelu_classes_hold_exactly_where_real_directml_computes_wrong_values(realdml):
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(CASES)], capture_output=True, text=True,
                          env=realdml, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    differs = json.loads(done.stdout.strip().splitlines()[-1])
    for (op, shape, channels), real in zip(CASES, differs):
        flagged = bool(classes_for(Call(op, ("float32",), _shapes(op, shape, channels), "forward", None)))
        assert flagged == real, (op, shape, channels)
    assert sum(differs) >= 4  # the classes are not empty on the real thing
