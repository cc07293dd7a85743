"""Every model in models/ scans end to end through the real CLI (one small measured step each)."""
from __future__ import annotations

import json

import pytest

from conftest import MODELS, run_cli

MODEL_FILES = sorted(p for p in MODELS.glob("*.py") if not p.name.startswith("_"))

pytestmark = [pytest.mark.live, pytest.mark.slow]


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_model_scans_with_all_three_phases(path, tmp_path):
    report_path = tmp_path / "report.json"
    result = run_cli(
        "scan", path, "--steps", "1", "--warmup", "0", "--batch-size", "2", "--quiet",
        "--json", report_path, "--out", tmp_path / "sessions", cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["meta"]["run_mode"] == "contract"
    assert report["meta"]["batch_size"] == 2 and report["meta"]["steps"] == 1
    assert report["summary"]["op_calls"] > 0
    phases = {row["phase"] for row in report["phases"] if row["calls"] > 0}
    assert {"forward", "backward", "optimizer"} <= phases
    assert list((tmp_path / "sessions").glob("*.session.json"))
