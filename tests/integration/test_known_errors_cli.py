"""A known device error mid-scan ends in one explained line and keeps the partial session."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.live


def test_float64_error_on_step_two_is_explained_and_the_partial_session_kept(cli, tmp_path):
    # GIVEN a model whose forward raises DirectML's float64 error on the second measured step
    result = cli("scan", FIXTURES / "float64_on_step2.py", "--steps", "3", "--warmup", "1", "--batch-size", "4",
                 "--device", "cpu", "--out", "runs")

    # THEN the scan exits non-zero with one stderr line naming float64 and its remedy, no traceback
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    # (torch itself may print unrelated warnings on some builds; dmlprof's own output is one line)
    lines = [line for line in result.stderr.splitlines() if line.startswith("dmlprof:")]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("dmlprof: error: step 2: ")
    assert "float64" in line and "use float32" in line

    # AND the partial session it names exists, says it is partial, and holds the first step's ops only
    saved = re.search(r"partial session saved to (.+?)\]", line)
    assert saved, line
    path = Path(saved.group(1))
    path = path if path.is_absolute() else tmp_path / path
    assert path.parent == tmp_path / "runs"
    session = json.loads(path.read_text(encoding="utf-8"))
    assert session["meta"]["partial"] is True
    assert "float64" in session["meta"]["partial_reason"]
    assert session["meta"]["steps"] == 1
    steps = set(session["ops"]["step"])
    assert steps == {0}
    assert {"forward", "backward", "optimizer"} <= set(session["ops"]["phase"])


def test_a_known_error_names_the_users_line_that_raised_it(cli, tmp_path):
    """The autocast refusal said what and why but not where (issue 37): a known device error names the user's
    line, as an unknown error's one line does."""
    # GIVEN a script whose fourth line raises the error torch gives autocast on a device with no autocast kernels
    (tmp_path / "amp_refused.py").write_text(
        "import torch\n"
        "x = torch.ones(2) * 2\n"
        "def step():\n"
        "    raise RuntimeError(\"Could not run 'aten::mm' with arguments from the 'AutocastPrivateUse1' backend.\")\n"
        "step()\n", encoding="utf-8")
    result = cli("scan", "amp_refused.py", "--device", "cpu", "--out", "runs")
    # THEN its one line explains it and names amp_refused.py:4
    lines = [line for line in result.stderr.splitlines() if line.startswith("dmlprof:")]
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert "mixed precision (torch.autocast) does not run on this device" in lines[0]
    assert "amp_refused.py:4)" in lines[0]
