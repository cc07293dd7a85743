"""A copy off the device that also converts keeps the source's dtype on real torch-directml (issue 33, R39):
the wrong-result class, judged by the real thing for calls inside it and its neighbours outside it (copies onto
the device, conversions on it, copies that keep the dtype)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dmlprof.tables.wrong_classes import Call, classes_for

pytestmark = pytest.mark.realdml

#: each line: what is copied, from where to where, and the dtype asked for
PROBE = '''
import json, torch, torch_directml
d = torch_directml.device()
found = []
for source in (torch.float32, torch.float16, torch.int64):
    for asked in (torch.float32, torch.float16, torch.int32, torch.int64, torch.bool):
        for origin, dest in (("dml", "cpu"), ("cpu", "dml"), ("dml", "dml")):
            x = torch.randn(4, 3).mul(5).to(source).to(d if origin == "dml" else "cpu")
            got = x.to(d if dest == "dml" else "cpu", asked)
            found.append([str(source)[6:], str(asked)[6:], origin, dest, str(got.dtype)[6:]])
print(json.dumps(found))
'''


def test_the_copy_class_holds_exactly_where_real_directml_drops_the_dtype(realdml):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=realdml, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    cases = json.loads(done.stdout.strip().splitlines()[-1])
    device = {"dml": "privateuseone", "cpu": "cpu"}
    wrong = 0
    for source, asked, origin, dest, got in cases:
        arguments = {"from_device": device[origin], "from_dtype": source, "to_device": device[dest], "dtype": asked}
        flagged = bool(classes_for(Call("aten::_to_copy", (source,), ((4, 3),), "forward", arguments)))
        assert flagged == (got != asked), (source, asked, origin, dest, got)
        wrong += got != asked
    assert wrong >= 10  # the class is not empty on the real thing: every dml->cpu conversion
