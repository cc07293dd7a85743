"""``dmlprof doctor`` end to end, on whatever machine runs the tests.

Marked live so it runs in both CI lanes: on torch 2.13 without torch-directml
and on torch 2.4.1 with torch-directml installed, both on Linux without a
DirectML adapter. The assertions read what is installed here and check the
doctor says the same.
"""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from dmlprof.backends.dml import adapter_possible

pytestmark = pytest.mark.live

DIRECTML_INSTALLED = importlib.util.find_spec("torch_directml") is not None
NO_ADAPTER_HERE = not adapter_possible()[0]


def _doctor_json(cli, *args, **kwargs):
    result = cli("doctor", "--json", *args, **kwargs)
    assert "Traceback" not in result.stderr, result.stderr
    data = json.loads(result.stdout)
    return result, data, {row["name"]: row for row in data["checks"]}


def test_doctor_prints_a_table_and_exits_zero(cli):
    result = cli("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["status", "check", "detail"]  # remedies go under their rows below 160 columns
    assert f"torch {torch.__version__}" in result.stdout
    assert lines[-1].endswith(" info") and " ok, " in lines[-1]


def test_doctor_json_tells_the_truth_about_this_machine(cli):
    result, data, rows = _doctor_json(cli)
    assert result.returncode == 0 == data["exit_code"]
    assert not [r for r in data["checks"] if r["status"] == "fail" and r["blocking"]]
    assert rows["torch"]["status"] == "ok" and torch.__version__ in rows["torch"]["detail"]
    assert data["snapshot"]["torch"]["cuda_available"] == torch.cuda.is_available()
    if DIRECTML_INSTALLED:
        assert rows["torch-directml"]["status"] == "ok"
        assert rows["torch-directml pin"]["status"] == "ok"  # the 2.4.1 lane installs the pinned pair
    else:
        assert rows["torch-directml"]["status"] == "info"
        assert rows["torch-directml"]["detail"] == "torch-directml is not installed"
    if NO_ADAPTER_HERE:
        possible = rows["DirectML adapter possible"]
        assert possible["status"] == ("warn" if DIRECTML_INSTALLED else "info")
        assert "no D3D12 adapter can exist" in possible["detail"]
        if DIRECTML_INSTALLED:
            assert possible["detail"].startswith("torch-directml is installed, but")
        assert data["snapshot"]["directml_probe"] is None  # never asked where no adapter can exist
        assert "DirectML adapters" not in rows


@pytest.mark.skipif(not NO_ADAPTER_HERE, reason="needs a machine where no DirectML adapter can exist")
def test_asking_for_dml_where_it_cannot_run_fails_with_exit_1_and_reads_the_files(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n\nwith torch.inference_mode():\n    pass\n", encoding="utf-8")
    result, data, rows = _doctor_json(cli, "--device", "dml", script)
    assert result.returncode == 1 == data["exit_code"]
    assert rows["scan device"]["status"] == "fail" and rows["scan device"]["blocking"] is True
    assert rows["inference_mode"]["status"] == "warn" and "train.py:3" in rows["inference_mode"]["detail"]
    assert rows["bfloat16"]["status"] == "ok"


def test_placebo_variables_warn_but_do_not_fail(cli):
    result, data, rows = _doctor_json(cli, env={"DML_GRAPH_COMPILER_OPTIONS": "-O3", "DML_VISIBLE_DEVICES": "0"})
    assert result.returncode == 0
    assert rows["DirectML env advice"]["status"] == "warn"
    assert "DML_GRAPH_COMPILER_OPTIONS=-O3" in rows["DirectML env advice"]["detail"]
    assert rows["DML_VISIBLE_DEVICES"]["status"] == "info"


def test_strict_exits_1_only_when_something_failed(cli):
    result, data, rows = _doctor_json(cli, "--strict")
    failed = any(r["status"] == "fail" for r in data["checks"])
    assert result.returncode == (1 if failed else 0) == data["exit_code"]


def test_a_file_with_a_syntax_error_is_one_line_naming_where_and_exit_2(cli, tmp_path):
    broken = tmp_path / "train.py"
    broken.write_text("import torch\nx = torch.randn(3\n", encoding="utf-8")
    result = cli("doctor", str(broken))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and result.stdout == "" and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"dmlprof: error: syntax error in {broken} at line 2: ")


def test_a_missing_file_is_one_line_and_exit_2(cli):
    result = cli("doctor", "no_such_train.py")
    assert result.returncode == 2
    assert result.stderr.strip() == "dmlprof: error: no_such_train.py: no such file"
