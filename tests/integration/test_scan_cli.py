"""The scan and report commands end to end, including every kind of bad input."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SIGNALS_REACH, FIXTURES, MODELS

pytestmark = pytest.mark.live


def _one_error_line(result):
    """GIVEN a failed run THEN stderr is exactly one 'dmlprof: error:' line and no traceback."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dmlprof: error: "), lines[0]
    return lines[0]


def _sessions(folder: Path):
    return sorted(folder.glob("*.session.json"))


def test_scan_writes_report_session_and_json(cli, tmp_path):
    result = cli("scan", MODELS / "lenet5.py", "--steps", "2", "--batch-size", "4", "--json", "r.json", "--out", "runs")
    assert result.returncode == 0, result.stderr
    assert "op calls" in result.stdout and "By phase" in result.stdout
    assert "USDT" not in result.stdout and "STAGE:" not in result.stdout  # no profiler log lines
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["meta"]["mode"] == "live" and report["meta"]["run_mode"] == "contract"
    assert report["meta"]["batch_size"] == 4 and report["meta"]["steps"] == 2
    summary = report["summary"]
    assert summary["op_calls"] == (summary["device_calls"] + summary["fallback_calls"] + summary["cpu_calls"]
                                   + summary["host_bookkeeping_calls"]) > 0
    assert {row["phase"] for row in report["ops"]} >= {"forward", "backward", "optimizer"}
    assert all(row["op"].startswith("aten::") for row in report["ops"])
    (session_file,) = _sessions(tmp_path / "runs")

    # GIVEN the saved session WHEN it is re-rendered THEN the report is the same, without re-running
    again = cli("report", session_file, "--json", "again.json")
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))["summary"] == summary
    # the report, then the file it wrote, announced (as the scan announced its own)
    assert again.stdout.rstrip().endswith("JSON report written to again.json")
    assert "JSON report written to r.json" in result.stdout
    assert again.stdout.split("JSON report written")[0].strip() in result.stdout


def test_script_mode_records_the_whole_run_with_its_own_argv(cli, tmp_path):
    # --warmup 0, 3 steps (the default), --run-to-end on a 3-epoch script: every step recorded, the script finishes.
    result = cli("scan", FIXTURES / "train_script.py", "--warmup", "0", "--run-to-end", "--json", "r.json", "--", "--epochs", "3")
    assert result.returncode == 0, result.stderr
    assert "trained 3 epochs" in result.stdout  # the script saw its own argv
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["meta"]["run_mode"] == "script"
    assert report["meta"]["steps"] == 3  # optimizer steps recorded
    assert {row["phase"] for row in report["ops"]} >= {"forward", "backward", "optimizer"}


def test_missing_file(cli, tmp_path):
    result = cli("scan", "no_such_model.py")
    assert result.returncode == 2
    assert "no such file" in _one_error_line(result)
    assert not _sessions(tmp_path / "reports")


@pytest.mark.parametrize(
    "fixture, words",
    [("not_python.bin", "not a Python file"), ("half_contract.py", "not make_batch"), ("no_ops_script.py", "neither")],
)
def test_neither_contract_nor_script(cli, tmp_path, fixture, words):
    result = cli("scan", FIXTURES / fixture)
    assert result.returncode == 2
    assert words in _one_error_line(result)


def test_batch_on_the_wrong_device(cli):
    result = cli("scan", FIXTURES / "wrong_device_batch.py")
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "meta" in line and "CPU tensors" in line


def test_model_that_raises_keeps_the_partial_session(cli, tmp_path):
    result = cli("scan", FIXTURES / "raises_on_step2.py", "--steps", "3", "--warmup", "1")
    assert result.returncode == 3
    line = _one_error_line(result)
    assert "boom from the model" in line and "partial session saved" in line
    (session_file,) = _sessions(tmp_path / "reports")
    saved = json.loads(session_file.read_text(encoding="utf-8"))
    assert saved["meta"]["partial"] is True
    assert "boom" in saved["meta"]["partial_reason"]
    assert saved["meta"]["steps"] == 1  # the first measured step finished, the second raised
    assert len(saved["ops"]["op"]) > 0
    # the partial session renders, and says it is partial
    shown = cli("report", session_file)
    assert shown.returncode == 0 and "PARTIAL" in shown.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT, a POSIX signal")
def test_ctrl_c_during_steps_keeps_the_partial_session(tmp_path):
    marker = tmp_path / "marker"
    env = dict(os.environ, DMLPROF_TEST_MARKER=str(marker), PYTHONIOENCODING="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "dmlprof", "scan", str(FIXTURES / "slow_steps.py"), "--steps", "50"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **SIGNALS_REACH,
    )
    deadline = time.monotonic() + 120
    while not marker.exists() or int(marker.read_text() or 0) < 3:  # two measured steps under way
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130
    result = subprocess.CompletedProcess(process.args, process.returncode, "", stderr)
    assert "interrupted" in _one_error_line(result)
    (session_file,) = _sessions(tmp_path / "reports")
    saved = json.loads(session_file.read_text(encoding="utf-8"))
    assert saved["meta"]["partial"] is True and saved["meta"]["steps"] >= 1


def test_report_on_a_file_that_is_not_a_session(cli, tmp_path):
    (tmp_path / "x.json").write_text('{"hello": 1}', encoding="utf-8")
    result = cli("report", "x.json")
    assert result.returncode == 2
    assert "not a dmlprof session" in _one_error_line(result)


def test_bad_numbers_are_one_line_errors(cli):
    result = cli("scan", MODELS / "lenet5.py", "--steps", "0")
    assert result.returncode == 2
    assert "--steps" in _one_error_line(result)
