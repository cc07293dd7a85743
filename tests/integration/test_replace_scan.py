"""``dmlprof scan --replace`` on the emulated DirectML device, through the real CLI.

GIVEN a model file whose step falls back on DirectML (GroupNorm + AdamW)
WHEN it is scanned with --device emulated-dml --replace
THEN the report compares before and after, the patched run makes zero fallback
calls, and the saved session and JSON report carry the comparison.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import MODELS

pytestmark = [pytest.mark.live, pytest.mark.slow]

FAST = ("--steps", "1", "--warmup", "1", "--batch-size", "2", "--no-profiler")


def _session(tmp_path: Path) -> dict:
    files = sorted((tmp_path / "out").glob("*.session.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text(encoding="utf-8"))


def test_groupnorm_adamw_has_no_fallbacks_after_replace(cli, tmp_path):
    done = cli("scan", MODELS / "groupnorm_net.py", "--device", "emulated-dml", "--replace", "--steps", "2",
               "--batch-size", "2", "--out", "out", "--json", "report.json")
    assert done.returncode == 0, done.stderr[-3000:]
    # the comparison leads, under its own title; the direction of the step-time ratio is in words
    assert done.stdout.splitlines()[0].endswith("before and after dmlprof's replacements")
    assert done.stdout.index("Before and after dmlprof's replacements") < done.stdout.index("op calls:")
    assert "x faster after patching" in done.stdout or "x slower after patching" in done.stdout
    assert "times on the emulated device are the host CPU's" in done.stdout
    assert "after patching: no fallback calls" in done.stdout
    session = _session(tmp_path)
    assert session["meta"]["optimizer"] == "DmlSafeAdamW"
    replace = session["extras"]["replace"]
    before, after = replace["before"], replace["after"]
    # Counted as the plain scan counts (a composite once): GroupNorm's backward once per GroupNorm layer
    # per step, AdamW's _foreach_lerp_ once per step, whose lerp falls back once per parameter inside.
    assert before["fallback_ops"] == {"aten::native_group_norm_backward": 2 * 8, "aten::_foreach_lerp_.Scalar": 2}
    assert before["fallback_calls"] == 2 * 8 + 2 and before["inner_fallback_calls"] == 2 * 8 + 2 * 26
    assert before["inner_ops"]["aten::_foreach_lerp_.Scalar"] == ["aten::lerp.Scalar_out"]
    assert after["fallback_calls"] == 0 and after["fallback_time_share"] == 0.0
    assert set(replace["removed_ops"]) == {"aten::_foreach_lerp_.Scalar", "aten::native_group_norm_backward"}
    assert after["step_time_ms"] > 0 and before["step_time_ms"] > 0
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["extras"]["replace"]["after"]["fallback_calls"] == 0


def test_plain_scan_names_the_replacement_per_hotspot(cli, tmp_path):
    done = cli("scan", MODELS / "groupnorm_net.py", "--device", "emulated-dml", *FAST, "--out", "out",
               "--json", "report.json")
    assert done.returncode == 0, done.stderr[-3000:]
    # the optimizer's real cause and its fix, in the terminal report
    assert "moment update (lerp) falls back once per parameter" in " ".join(done.stdout.split())
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    text = json.dumps(report)
    assert "only resets its moments" in text and "dmlprof.replacements.ops.group_norm" in text


@pytest.mark.parametrize("model", sorted(p.name for p in MODELS.glob("*.py") if not p.name.startswith("_")))
def test_every_model_has_no_fallbacks_after_replace(cli, tmp_path, model):
    done = cli("scan", MODELS / model, "--device", "emulated-dml", "--replace", *FAST, "--out", "out", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    replace = _session(tmp_path)["extras"]["replace"]
    assert replace["after"]["fallback_calls"] == 0, replace["remaining_ops"]


SCRIPT = """
import torch
from torch import nn

device = torch.device("privateuseone", 0)
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.Flatten(), nn.Linear(8 * 8 * 8, 2)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(4, 3, 8, 8).to(device), torch.randint(0, 2, (4,)).to(device)
for _ in range(2):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_replace_in_script_mode_runs_the_script_under_the_replacements(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = cli("scan", script, "--device", "emulated-dml", "--replace", "--no-profiler", "--warmup", "0", "--out", "out")
    assert done.returncode == 0, done.stderr[-3000:]
    replace = _session(tmp_path)["extras"]["replace"]
    # the plain scan's unit: _foreach_lerp_ once a step (its lerp fell back once per parameter inside)
    assert replace["before"]["fallback_ops"] == {"aten::_foreach_lerp_.Scalar": 2, "aten::native_group_norm_backward": 2}
    assert replace["before"]["inner_fallback_calls"] == 2 * 6 + 2
    assert replace["after"]["fallback_calls"] == 0


def test_replace_does_not_combine_with_target(cli):
    done = cli("scan", MODELS / "lenet5.py", "--replace", "--target", "dml")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "does not combine with --target" in done.stderr
    assert "--device emulated-dml --replace" in done.stderr  # the command that works
