"""Integer operands broadcast on real torch-directml (re-probe 16, 21): wrong where an integer operand lacks
leading dimensions of the other's, right where the ranks are equal whichever sizes broadcast (the masked mean
pooling `h.sum(1) / mask.sum(1, keepdim=True)`). The integer-broadcast classes, judged by the real thing inside
and beside them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dmlprof.tables.wrong_classes import Call, classes_for

pytestmark = pytest.mark.realdml

#: (op, dtype of the first operand, of the second, its shape, the second's): the float operand, where there is
#: one, is of the higher rank or of equal rank (a float of lower rank is flagged too: the recording keeps no
#: dtype per operand)
CASES = [
    ("div", "float32", "int64", [4, 16], [4, 1]), ("div", "float32", "int64", [4, 1], [4, 16]),
    ("mul", "float32", "int64", [4, 10, 16], [4, 10, 1]), ("mul", "float32", "int64", [4, 16], [1, 16]),
    ("remainder", "int64", "int64", [4, 16], [4, 1]), ("div", "int64", "int64", [1, 5], [5, 1]),
    ("div", "float32", "int64", [4, 16], [1]),
    ("div", "float32", "int64", [5, 1], [5]), ("mul", "float32", "int64", [5, 1], [5]),
    ("div", "float32", "int64", [4, 16], [16]), ("mul", "float32", "int64", [4, 10, 16], [10, 1]),
    ("remainder", "int64", "int64", [5], [5, 1]), ("div", "int64", "int64", [2, 3, 4, 5], [4, 5]),
    # re-probe 17, 9/32: a float with an integer of lower rank (an ALiBi bias, scores - arange(T)) in the
    # arithmetic ops too, int32 as int64; integer with integer, and equal ranks, right
    ("sub", "float32", "int64", [4, 12], [12]), ("add", "float32", "int32", [4, 12], [12]),
    ("rsub", "float32", "int64", [4, 12], [12]), ("mul", "float32", "int32", [4, 12], [12]),
    ("maximum", "float32", "int64", [4, 12], [12]), ("minimum", "float32", "int64", [4, 12], [12]),
    ("add", "float32", "int64", [2, 4, 12], [4, 12]), ("sub", "float32", "int64", [4, 12], [4, 1]),
    ("add", "int64", "int64", [4, 12], [12]), ("mul", "int64", "int64", [4, 12], [12]),
]

#: the dispatcher's overload each op's call records as
OVERLOADS = {"maximum": "aten::maximum", "minimum": "aten::minimum"}

PROBE = '''
import json, sys, torch, torch_directml
d = torch_directml.device()
torch.manual_seed(0)
found = []
for op, first, second, a_shape, b_shape in json.loads(sys.argv[1]):
    a = torch.randn(a_shape) * 10 if first == "float32" else torch.randint(-20, 20, a_shape)
    b = torch.randint(1, 9, b_shape, dtype=getattr(torch, second))
    got, want = getattr(torch, op)(a.to(d), b.to(d)).cpu(), getattr(torch, op)(a, b)
    found.append(int((~torch.isclose(got.double(), want.double(), rtol=1e-5, atol=1e-5)).sum()))
print(json.dumps(found))
'''


def test_the_integer_broadcast_classes_hold_exactly_where_real_directml_computes_wrong_values(realdml):
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(CASES)], capture_output=True, text=True,
                          env=realdml, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    wrong = json.loads(done.stdout.strip().splitlines()[-1])
    for (op, first, second, a_shape, b_shape), count in zip(CASES, wrong):
        dtypes = tuple(sorted({first, second}))
        overload = OVERLOADS.get(op, f"aten::{op}.Tensor")
        flagged = bool(classes_for(Call(overload, dtypes, (tuple(a_shape), tuple(b_shape)), "forward")))
        assert flagged == (count > 0), (op, first, second, a_shape, b_shape, count)
    assert sum(count > 0 for count in wrong) >= 4  # the classes are not empty on the real thing
