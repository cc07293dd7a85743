"""Re-probe 15 case 19: a script that profiles a block itself (``with dmlprof.profile():``), scanned or checked.

The tap has room for one recording a process; the block's own recording was refused with TapUnavailable, which
ended the scan with exit 3 as the script's own error. The block must run as it runs unscanned, and its session
must be usable as the docs show (``run.table()``, ``run.session.ops``), holding the enclosing recording's calls of
the block, or saying why it holds none.
"""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.live

PROFILING_SCRIPT = """\
import json, sys
import torch, torch.nn as nn
import dmlprof

torch.manual_seed(0)
m = nn.Linear(8, 2)
with dmlprof.profile() as prof:
    m(torch.randn(4, 8, device=prof.device)).sum().backward()
losses = [round(m(torch.randn(4, 8)).pow(2).mean().item(), 4) for _ in range(3)]
json.dump({"recorded_by": prof.recorded_by, "ops": sorted(set(prof.session.ops["op"])), "table": prof.table(),
           "notes": list(prof.session.meta.notes), "losses": losses}, open(sys.argv[1], "w"))
"""


def test_a_scanned_script_that_profiles_a_block_runs_to_its_end_and_the_block_holds_its_calls(tmp_path):
    from dmlprof.cli import main

    script = tmp_path / "profiles_itself.py"
    script.write_text(PROFILING_SCRIPT, encoding="utf-8")
    found = tmp_path / "found.json"
    assert main(["scan", str(script), "--device", "cpu", "--out", str(tmp_path / "r"), "--", str(found)]) == 0
    block = json.loads(found.read_text(encoding="utf-8"))
    assert "already active in this process" in block["recorded_by"]
    assert {"aten::addmm", "aten::mm"} <= set(block["ops"])  # the block's forward and backward, from the scan
    assert "aten::pow.Tensor_Scalar" not in block["ops"]  # the calls after the block are not the block's
    assert "recorded by the dmlprof recording already active" in " ".join(block["notes"])
    assert "aten::addmm" in block["table"]
    assert len(block["losses"]) == 3


WARMUP_SCRIPT = """\
import json, sys
import torch, torch.nn as nn
import dmlprof

m = nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(4):
    if step == 1:  # a warm-up step the scan does not record
        with dmlprof.profile() as prof:
            torch.randn(3).exp()
        json.dump({"calls": len(prof.session.ops), "notes": list(prof.session.meta.notes)}, open(sys.argv[1], "w"))
    opt.zero_grad(); m(torch.randn(2, 4)).sum().backward(); opt.step()
"""


def test_a_block_in_an_unrecorded_warm_up_step_has_an_empty_session_that_says_why(tmp_path):
    from dmlprof import runner
    from dmlprof.backends import resolve_backend

    script = tmp_path / "warm_block.py"
    script.write_text(WARMUP_SCRIPT, encoding="utf-8")
    found = tmp_path / "found.json"
    runner.scan(script, backend=resolve_backend("cpu"), profiler=False, warmup=3, steps=1, run_to_end=True,
                script_args=[str(found)])
    block = json.loads(found.read_text(encoding="utf-8"))
    assert block["calls"] == 0
    assert "kept none of its calls" in " ".join(block["notes"])


def test_a_profile_block_inside_another_holds_its_own_calls_and_the_outer_one_holds_both():
    import torch

    import dmlprof

    with dmlprof.profile("cpu", profiler=False) as outer:
        torch.ones(3).exp()
        with dmlprof.profile("cpu", profiler=False) as inner:
            torch.ones(3).sin()
        torch.ones(3).cos()
    assert outer.recorded_by is None and "already active" in inner.recorded_by
    inner_ops = set(inner.session.ops["op"])
    assert "aten::sin" in inner_ops and not {"aten::exp", "aten::cos"} & inner_ops
    assert {"aten::exp", "aten::sin", "aten::cos"} <= set(outer.session.ops["op"])


def test_an_error_in_a_nested_block_is_the_programs_own_and_leaves_a_partial_session():
    import torch

    import dmlprof

    with dmlprof.profile("cpu", profiler=False):
        with pytest.raises(ZeroDivisionError):
            with dmlprof.profile("cpu", profiler=False) as inner:
                torch.ones(2).neg()
                1 / 0
    assert inner.session.meta.partial and "aten::neg" in set(inner.session.ops["op"])
