"""scatter_add with repeated targets keeps one write per target on real torch-directml (re-probe 12, case 25): the
wrong-result class, judged by the real thing for calls inside it (an index repeating a target) and their
neighbours outside it (unique targets; equal columns in different rows along dim 1)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dmlprof.directml.call_arguments import call_arguments
from dmlprof.tables.wrong_classes import Call, classes_for

pytestmark = pytest.mark.realdml

#: (op, self's shape, dim, index, reduce or None)
CASES = [
    ("aten::scatter_add", [6], 0, [0, 1, 1, 2, 0, 1], None),
    ("aten::scatter_add", [6], 0, [3, 1, 0, 2, 5, 4], None),
    ("aten::scatter_add", [4, 2], 0, [[0, 1], [0, 1], [3, 0]], None),
    ("aten::scatter_add", [3, 3], 1, [[0, 1, 2], [2, 1, 0], [1, 2, 0]], None),
    ("aten::scatter_add", [3, 3], 1, [[0, 0, 1], [2, 1, 1], [0, 1, 2]], None),
    ("aten::scatter_add_", [6], 0, [0, 1, 1, 2, 0, 1], None),
    ("aten::scatter.reduce", [6], 0, [0, 1, 1, 2, 0, 1], "multiply"),
    ("aten::scatter.reduce", [6], 0, [3, 1, 0, 2, 5, 4], "add"),
]

PROBE = '''
import json, sys, torch, torch_directml
d = torch.device(torch_directml.device())
found = []
for op, shape, dim, index, reduce in json.loads(sys.argv[1]):
    for dtype in (torch.float32, torch.int64):
        index_t = torch.tensor(index)
        src = (torch.arange(index_t.numel()).reshape(index_t.shape) + 2).to(dtype)
        def run(device):
            self = torch.ones(shape, dtype=dtype, device=device)
            i, s = index_t.to(device), src.to(device)
            if reduce:
                return self.scatter(dim, i, s, reduce=reduce)
            return self.scatter_add_(dim, i, s) if op.endswith("_") else self.scatter_add(dim, i, s)
        found.append(bool((run(d).cpu() != run("cpu")).any()))
print(json.dumps(found))
'''


def test_the_scatter_class_holds_exactly_where_real_directml_loses_repeated_writes(realdml):
    import torch

    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(CASES)], capture_output=True, text=True,
                          env=realdml, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    differs = iter(json.loads(done.stdout.strip().splitlines()[-1]))
    wrong = 0
    for op, shape, dim, index, reduce in CASES:
        index_t = torch.tensor(index)
        extra = (reduce,) if reduce else ()
        arguments = json.loads(call_arguments(op, (torch.ones(shape), dim, index_t, torch.ones(index_t.shape), *extra),
                                              {}))
        for dtype in ("float32", "int64"):
            flagged = bool(classes_for(Call(op, (dtype, "int64"), (tuple(shape),), "forward", arguments)))
            real = next(differs)
            assert flagged == real, (op, shape, dim, index, reduce, dtype)
            wrong += real
    assert wrong >= 8  # the class is not empty on the real thing
