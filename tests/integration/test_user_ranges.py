"""The scanned code's own record_function ranges, placed on the recorded calls they hold.

torch.profiler sees every call the recorder sees, and more: the warm-up steps a script's scan forgets,
and calls made inside other calls. Each recorded call must still get the ranges of its own event.
"""
from __future__ import annotations

import json

import pytest

from dmlprof.schema import parse_ranges
from dmlprof.session import Session

pytestmark = pytest.mark.live

SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.AdamW(model.parameters())
for i in range(4):
    # (closed before the step: torch 2.4.1's profiler drops a range still open when it stops, at the last step)
    with torch.profiler.record_function(f"iteration {i}"):
        with torch.profiler.record_function("forward <b>"):
            loss = model(torch.randn(4, 8)).pow(2).mean()  # mean divides in place inside itself
        loss.backward()
    opt.step()
    opt.zero_grad()
'''


def test_ranges_follow_each_recorded_call_past_the_warm_up(cli, tmp_path):
    script = tmp_path / "ranged.py"
    script.write_text(SCRIPT)
    report, trace = tmp_path / "r.json", tmp_path / "t.json"
    done = cli("scan", str(script), "--device", "cpu", "--warmup", "1", "--steps", "2",
               "--out", str(tmp_path / "out"), "--json", str(report), "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    (session_file,) = (tmp_path / "out").glob("*.session.json")
    ops = Session.load(session_file).ops
    assert set(ops["step"]) == {0, 1}
    for call in ops.itertuples():
        names = [name for name, _ in parse_ranges(call.ranges)]
        # optimizer step s + 1 of the script (after 1 warm-up step) is recorded step s: iteration s + 1's calls
        expected = [] if call.phase == "optimizer" else [f"iteration {call.step + 1}"]
        assert names[:1] == expected, (call.seq, call.op, call.ranges)
        # the model's calls, and the batch and loss made in the range around it (outside any module)
        in_forward = call.phase == "forward" or (
            call.phase == "other" and call.op in ("aten::randn", "aten::pow.Tensor_Scalar", "aten::mean"))
        assert ("forward <b>" in names) == in_forward, (call.seq, call.op, call.phase, call.ranges)

    rows = {row["range"]: row for row in json.loads(report.read_text())["ranges"]}
    assert list(rows) == ["iteration 1", "forward <b>", "iteration 2"]
    assert rows["iteration 1"]["calls"] == ((ops["step"] == 0) & (ops["phase"] != "optimizer")).sum()
    assert rows["forward <b>"]["occurrences"] == 2
    assert rows["forward <b>"]["calls"] == sum("forward <b>" in r for r in ops["ranges"])

    events = json.loads(trace.read_text())["traceEvents"]
    # torch's own range around each optimizer step is not the script's: left out
    drawn = [e for e in events if e.get("cat") == "user_annotation" and e["pid"] != 1]
    assert sorted(e["name"] for e in drawn) == ["forward <b>", "forward <b>", "iteration 1", "iteration 2"]
    for inner in (e for e in drawn if e["name"] == "forward <b>"):  # each inside its own iteration
        outer = [e for e in drawn if e["name"].startswith("iteration")
                 and e["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] < e["ts"] + e["dur"]]
        assert len(outer) == 1
