"""``dmlprof ops OP`` says what a scan says (issue 32, item 5): the measured table, the failure rules (judged on
a sample call traced from the op's schema) and the wrong-result classes, not only the dispatcher's verdict."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def described():
    done = subprocess.run([sys.executable, "-m", "dmlprof", "ops", "eye", "one_hot", "upsample_bilinear2d.vec",
                           "flip", "rrelu_with_noise", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return {item["op"]: item["directml"] for item in json.loads(done.stdout)["ops"]}


def test_eye_ends_the_process_as_scans_say(described):
    assert any(j["op"] == "aten::eye" and j["kind"] == "aborts" for j in described["aten::eye"]["traced_failures"])
    assert described["aten::eye"]["scan_says"].startswith("ends the process")


def test_one_hot_raises_at_its_scatter_along_a_negative_dim(described):
    assert [j["op"] for j in described["aten::one_hot"]["traced_failures"]] == ["aten::scatter_.value"]


def test_bilinear_upsampling_is_said_wrong_and_flip_names_its_class(described):
    bilinear = described["aten::upsample_bilinear2d.vec"]
    assert any(m["flagged_wrong"] and m["op"] == "aten::upsample_bilinear2d" for m in bilinear["measured"])
    assert bilinear["scan_says"].startswith("runs, with wrong results")
    flip = described["aten::flip"]
    assert flip["failure_rules"] and "negative dim" in flip["failure_rules"][0]["class"]


def test_rrelu_with_noise_is_said_wrong_by_its_class(described):
    """Re-probe 21, 27: a fallback whose class of calls (training, the input's gradient taken) is wrong on DirectML
    was said to run on the device."""
    rrelu = described["aten::rrelu_with_noise"]
    assert any("in training" in w["class"] for w in rrelu["wrong_classes"])
    assert rrelu["scan_says"].startswith("runs, with wrong results")
