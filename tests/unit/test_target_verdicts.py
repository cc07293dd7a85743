"""Every XPU/MPS verdict of models/ and the zoo agrees with the wheel it is read from (docs/targets.md).

``tools/check_target_verdicts.py`` judged each call again from the torch 2.14.1 wheel's own files and wrote
``benchmarks/results/target_verdicts-torch2.14.1.json``; these tests hold that result against the shipped
tables, and judge one model's step live against the table (seconds).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from dmlprof.targets import semantics_for

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("target_verdicts-torch*.json"))
ON_DEVICE = ("native", "composite_explicit", "composite_implicit")


def _checker():
    spec = importlib.util.spec_from_file_location("check_target_verdicts", ROOT / "tools" / "check_target_verdicts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _torch(path: Path) -> str:
    return path.stem.split("-torch", 1)[1]


@pytest.mark.slow  # predicts every model on each shipped torch's tables
def test_each_shipped_torch_has_its_check():
    from dmlprof.tables.targets import shipped_target_tables

    versions = {version for versions in shipped_target_tables().values() for version in versions}
    assert {_torch(path) for path in RESULTS} == versions


@pytest.mark.parametrize("result", RESULTS, ids=_torch)
def test_every_model_file_of_models_was_checked_on_each_target_with_no_disagreement(result):
    models = _results(result)["models"]
    for path in sorted((ROOT / "models").glob("*.py")):
        entry = models[f"models/{path.name}"]
        for target in ("xpu", "mps"):
            assert "skipped" not in entry[target], (path.name, target)
            assert entry[target]["disagreements"] == [], (path.name, target)


@pytest.mark.parametrize("result", RESULTS, ids=_torch)
def test_no_checked_zoo_entry_disagrees_with_the_wheel(result):
    for path, entry in _results(result)["models"].items():
        for target, checked in entry.items():
            if "skipped" not in checked:
                assert checked["disagreements"] == [], (path, target)


@pytest.mark.parametrize("target", ["xpu", "mps"])
@pytest.mark.parametrize("result", RESULTS, ids=_torch)
def test_the_shipped_table_judges_every_checked_op_as_the_wheel_did(result, target):
    semantics = semantics_for(target, _torch(result), environ={})
    for path, entry in _results(result)["models"].items():
        checked = entry[target]
        if "skipped" in checked:
            continue
        for op in checked["ops_on_device"]:
            assert semantics.kind(op) in ON_DEVICE or op in semantics.table.cpu_fallback, (path, op)
        for op in checked["ops_falling_back"]:
            assert semantics.kind(op) in ("missing", "fallback"), (path, op)


def test_a_step_judged_live_against_the_shipped_table_agrees(tmp_path):
    """lenet5's predicted step, each call judged again by the checker against the table's kinds."""
    checker = _checker()
    for target in ("xpu", "mps"):
        semantics = semantics_for(target, environ={})
        kinds = {op: semantics.table.kind(op) for op in semantics.table.ops()}
        checked = checker.check_model(str(ROOT / "models" / "lenet5.py"), target, kinds, semantics, {})
        assert checked["ops_on_device"] and checked["disagreements"] == []


def test_the_checker_names_a_call_the_wheel_does_not_register():
    checker = _checker()
    semantics = semantics_for("xpu", environ={})
    kinds = {"aten::addmm": "missing", "aten::mm": "native"}
    found = checker.judge_row("aten::addmm", "device", [], kinds, semantics)
    assert found and found[0][0] == "aten::addmm" and "missing" in found[0][2]
    assert checker.judge_row("aten::mm", "device", [], kinds, semantics) == []
    assert checker.judge_row("aten::x", "fallback", ["aten::mm"], kinds, semantics)  # registered, yet fell back
