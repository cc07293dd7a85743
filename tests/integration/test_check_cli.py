"""``dmlprof check``: the CI gate, end to end on real models predicted for DirectML (no device needed).

GIVEN a model whose every op runs on DirectML (LeNet-5) and one with fallbacks (GroupNorm + AdamW)
WHEN ``dmlprof check --target dml`` runs with limits
THEN the first passes (exit 0) and the second fails (exit 6) with one error line, GitHub Actions
annotations on the source line of each fallback (only when GITHUB_ACTIONS is set) and JUnit XML.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import REPO

pytestmark = pytest.mark.live


def _check(tmp_path, *args, github=False):
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    env.update({"PYTHONIOENCODING": "utf-8"}, **({"GITHUB_ACTIONS": "true"} if github else {}))
    # run from the repository, as CI does: annotations name files relative to it
    return subprocess.run([sys.executable, "-m", "dmlprof", "check", *map(str, args), "--out", str(tmp_path / "out")],
                          cwd=REPO, env=env, capture_output=True, text=True, encoding="utf-8", timeout=600)


def test_a_model_without_fallbacks_passes(tmp_path):
    junit = tmp_path / "check.xml"
    result = _check(tmp_path, "models/lenet5.py", "--target", "dml", "--junit", junit, github=True)
    assert result.returncode == 0, result.stderr
    assert "passed" in result.stdout.splitlines()[0] and "::error" not in result.stdout
    assert f"JUnit XML written to {junit}" in result.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    assert [case.get("name") for case in suite.findall("testcase")] == ["calls on the device", "ops that fell back"]
    assert suite.find("testcase/failure") is None


@pytest.mark.quick
def test_a_model_with_fallbacks_fails_with_annotations_and_junit(tmp_path):
    junit = tmp_path / "check.xml"
    result = _check(tmp_path, "models/groupnorm_net.py", "--target", "dml", "--max-fallback-share", "5%",
                    "--max-fallback-ops", "3", "--junit", junit, github=True)
    assert result.returncode == 6, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("dmlprof: error:")]
    assert len(errors) == 1 and "fallback share of calls" in errors[0] and "session saved to" in errors[0]
    assert "Traceback" not in result.stderr
    assert "FAIL  fallback share of calls" in result.stdout and "ok    ops that fell back 2 (limit 3)" in result.stdout
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    # GroupNorm's backward on the line of the model that calls it; AdamW's lerp has no line of the user's
    assert any(a.startswith("::error file=models/groupnorm_net.py,line=40,title=") and "native_group_norm_backward" in a
               for a in annotations)
    assert any("lerp" in a and "file=" not in a for a in annotations)
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1"  # calls on the device passed
    failure = suite.find("testcase/failure")
    assert failure.get("type") == "LimitExceeded" and "models/groupnorm_net.py:40" in failure.text


def test_without_github_actions_there_are_no_annotations_and_no_limit_means_none_may_fall_back(tmp_path):
    result = _check(tmp_path, "models/groupnorm_net.py", "--target", "dml")
    assert result.returncode == 6, result.stderr
    assert "::" not in "".join(line[:2] for line in result.stdout.splitlines())
    assert "ops that fell back 2 (limit 0)" in result.stdout


@pytest.mark.parametrize("value", ["1.5", "-1%", "nan", "abc"])
def test_a_share_outside_0_to_1_is_a_usage_error(tmp_path, value):
    result = _check(tmp_path, "models/lenet5.py", "--target", "dml", "--max-fallback-share", value)
    assert result.returncode == 2 and result.stderr.startswith("dmlprof: error:") and "Traceback" not in result.stderr


def test_a_training_script_written_for_cuda_is_gated_with_from_cuda(tmp_path):
    # GIVEN a script that calls .cuda() and torch.cuda.*, as most training scripts do
    junit = tmp_path / "check.xml"
    result = _check(tmp_path, "tests/fixtures/cuda_style_train.py", "--target", "dml", "--from", "cuda",
                    "--junit", junit)
    # THEN its AdamW's lerp falls back on DirectML, and the gate fails on it (not on "unrecognized arguments")
    assert result.returncode == 6, result.stderr
    assert "FAIL  ops that fell back 1 (limit 0)" in result.stdout and "lerp" in result.stdout
    assert "ok    calls on the device" in result.stdout
    assert ET.parse(junit).getroot().find("testsuite").get("failures") == "1"


def test_check_help_offers_the_script_flags():
    result = subprocess.run([sys.executable, "-m", "dmlprof", "check", "--help"], cwd=REPO, capture_output=True,
                            text=True, encoding="utf-8", timeout=60)
    assert result.returncode == 0 and "--from {cuda,mps}" in result.stdout and "--run-to-end" in result.stdout


def test_a_script_that_never_uses_the_device_does_not_pass(tmp_path):
    # GIVEN a script that keeps every tensor on the CPU itself: on any device, nothing can fall back
    result = _check(tmp_path, "tests/fixtures/train_script.py", "--target", "dml", "--warmup", "0",
                    "--max-fallback-share", "100%", "--max-fallback-ops", "100")
    assert result.returncode == 6, result.stderr
    verdict = next(line for line in result.stdout.splitlines() if line.startswith("dmlprof check"))
    assert verdict.endswith("FAILED") and "FAIL  calls on the device 0 (limit at least 1)" in result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("dmlprof: error:")]
    assert len(errors) == 1 and "nothing was tested" in errors[0] and "never used" in errors[0]
    assert "see the fallbacks above" not in errors[0]  # none is listed: the limit's own words say what to change
