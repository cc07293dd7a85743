"""Torch-version truth: which ops of a session differ from torch 2.4.1's path (pure, on hand-made tables)."""
from __future__ import annotations

import json

import pytest

from dmlprof.tables import drift

TABLE = {
    "format": drift.FORMAT,
    "format_version": 1,
    "baseline_torch": "2.4.1",
    "comparisons": [
        {"torch": "2.13.0", "not_on_baseline_path": {"aten::isneginf.out": ["llama", "gpt2"]}},
        {"torch": "2.14.1", "not_on_baseline_path": {"aten::isneginf.out": ["llama"], "aten::new_op_2141": ["vit"]}},
    ],
}
BASELINE_OPS = {"aten::mm", "aten::isneginf.out", "aten::lerp.Scalar_out"}


def test_a_session_on_torch_241_has_no_drift_whatever_it_holds():
    assert drift.path_drift(["aten::isneginf.out", "aten::mm_dtype"], "2.4.1+cu121", TABLE, BASELINE_OPS) == []


def test_ops_reached_only_off_the_241_path_are_named_with_where_they_were_seen():
    found = drift.path_drift(["aten::mm", "aten::isneginf.out", "aten::lerp.Scalar_out"], "2.13.0+cpu",
                             TABLE, BASELINE_OPS)
    assert [(f.op, f.reason, f.seen_in, f.measured_with) for f in found] == [
        ("aten::isneginf.out", "not_on_baseline_path", ("llama", "gpt2"), "2.13.0")]
    assert "not on torch 2.4.1's path, reached on torch 2.13.0 (in the zoo: llama, gpt2)" in found[0].describe()


def test_ops_torch_241_does_not_define_are_named_even_if_the_zoo_never_reached_them():
    found = drift.path_drift(["aten::mm.dtype", "torchvision::nms", "aten::mm"], "2.13.0", TABLE, BASELINE_OPS)
    assert [(f.op, f.reason) for f in found] == [("aten::mm.dtype", "not_in_baseline_torch")]
    assert found[0].describe() == "aten::mm.dtype: not an op of torch 2.4.1"


@pytest.mark.parametrize("version, measured", [("2.13.0", "2.13.0"), ("2.12.1", "2.13.0"), ("2.14.0", "2.14.1"),
                                               ("2.20.0", "2.14.1"), ("2.6.0", "2.13.0")])
def test_the_nearest_measured_torch_answers(version, measured):
    found = drift.path_drift(["aten::isneginf.out"], version, TABLE, BASELINE_OPS)
    assert found[0].measured_with == measured


def test_a_table_without_comparisons_names_nothing():
    empty = dict(TABLE, comparisons=[])
    assert drift.path_drift(["aten::isneginf.out", "aten::x.y"], "2.13.0", empty, BASELINE_OPS) == []


def test_path_note_says_whose_code_paths_a_report_shows():
    assert "torch-directml 0.2.5 pins" in drift.path_note("2.4.1+cu121")
    note = drift.path_note("2.13.0+cpu")
    assert note.startswith("code paths of torch 2.13.0;") and "2.4.1" in note


def test_the_shipped_table_loads_and_the_default_baseline_is_the_directml_table():
    table = drift.load_drift()
    assert table["baseline_torch"] == "2.4.1" and table["comparisons"]
    # the shipped DirectML table was read against torch 2.4.1: its ops are torch 2.4.1's
    assert drift.path_drift(["aten::lerp.Scalar_out"], "2.13.0") == []


def test_load_drift_refuses_other_files(tmp_path):
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"format": "something-else"}), encoding="utf-8")
    with pytest.raises(ValueError):
        drift.load_drift(str(other))
