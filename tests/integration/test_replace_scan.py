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
    assert "With dmlprof's replacements" in done.stdout
    assert "after patching: no fallback calls" in done.stdout
    session = _session(tmp_path)
    assert session["meta"]["optimizer"] == "DmlSafeAdamW"
    replace = session["extras"]["replace"]
    before, after = replace["before"], replace["after"]
    # AdamW's lerp once per parameter per step, GroupNorm's backward once per GroupNorm layer per step.
    assert before["fallback_ops"]["aten::lerp.Scalar_out"] == 2 * 26
    assert before["fallback_ops"]["aten::native_group_norm_backward"] == 2 * 8
    assert after["fallback_calls"] == 0 and after["fallback_time_share"] == 0.0
    assert set(replace["removed_ops"]) == {"aten::lerp.Scalar_out", "aten::native_group_norm_backward"}
    assert after["step_time_ms"] > 0 and before["step_time_ms"] > 0
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["extras"]["replace"]["after"]["fallback_calls"] == 0


def test_plain_scan_names_the_replacement_per_hotspot(cli, tmp_path):
    done = cli("scan", MODELS / "groupnorm_net.py", "--device", "emulated-dml", *FAST, "--out", "out",
               "--json", "report.json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lerp falling back" in done.stdout  # the optimizer's real cause, in the terminal report
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    text = json.dumps(report)
    assert "resets Adam's moments" in text and "dmlprof.replacements.ops.group_norm" in text


@pytest.mark.parametrize("model", sorted(p.name for p in MODELS.glob("*.py") if not p.name.startswith("_")))
def test_every_model_has_no_fallbacks_after_replace(cli, tmp_path, model):
    done = cli("scan", MODELS / model, "--device", "emulated-dml", "--replace", *FAST, "--out", "out", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    replace = _session(tmp_path)["extras"]["replace"]
    assert replace["after"]["fallback_calls"] == 0, replace["remaining_ops"]


def test_replace_needs_a_model_file(cli, tmp_path):
    script = Path(__file__).resolve().parents[1] / "fixtures" / "train_script.py"
    done = cli("scan", script, "--replace", "--out", "out")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "--replace needs a model file" in done.stderr


def test_replace_does_not_combine_with_target(cli):
    done = cli("scan", MODELS / "lenet5.py", "--replace", "--target", "dml")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "does not combine with --target" in done.stderr
