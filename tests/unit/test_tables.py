"""The shipped DirectML op table, the OpTable API and ``dmlprof ops``."""
import json
from collections import Counter

import pytest

from dmlprof.cli import main
from dmlprof.tables import KINDS, OpTable, load_table, normalize_op

# From /work/shared/BACKEND_FACTS.md: torch-directml 0.2.5.dev240914 on torch 2.4.1.
FACT_COUNTS = {"native": 296, "fallback": 593, "composite_explicit": 1407, "composite_implicit": 831}


def test_shipped_counts_pin_the_facts():
    table = load_table("dml")
    assert table.counts == FACT_COUNTS
    assert dict(Counter(table.kind(op) for op in table.ops())) == FACT_COUNTS
    assert {kind: len(table.ops(kind)) for kind in KINDS} == FACT_COUNTS


def test_shipped_table_metadata_and_registrations():
    table = load_table("dml")
    assert (table.package, table.package_version, table.torch_version) == ("torch-directml", "0.2.5.dev240914", "2.4.1")
    assert table.source == "shipped"
    assert table.version_label() == "torch-directml 0.2.5.dev240914 (read against torch 2.4.1)"
    own = table.registrations["PrivateUse1"]
    assert len(own) == 299
    assert sum(name.startswith("aten::") for name in own) == 296
    # Every aten registration is exactly a native entry, and vice versa.
    assert sorted(name for name in own if name.startswith("aten::")) == table.ops("native")
    assert "aten::reshape" in table.registrations["AutogradPrivateUse1"]


@pytest.mark.parametrize("op, kind", [
    ("aten::lerp.Scalar_out", "fallback"),
    ("aten::native_group_norm_backward", "fallback"),
    ("aten::add.out", "native"),  # RegisterPrivateUse1.cpp in torch-directml's dump
    ("aten::lerp.Scalar", "composite_explicit"),  # structured functional form over lerp.Scalar_out
    ("aten::linear", "composite_implicit"),
])
def test_known_entries(op, kind):
    assert load_table("dml").kind(op) == kind


def test_spellings_and_unknown():
    table = load_table("dml")
    for spelling in ("aten::lerp.Scalar_out", "aten.lerp.Scalar_out", "lerp.Scalar_out", "torch.ops.aten.lerp.Scalar_out"):
        assert normalize_op(spelling) == "aten::lerp.Scalar_out"
        assert spelling in table
    assert normalize_op("aten.relu.default") == "aten::relu"
    assert table.kind("aten::no_such_op") is None
    assert "aten::no_such_op" not in table


def test_document_format_is_checked():
    from dmlprof.errors import UsageError

    with pytest.raises(UsageError):
        OpTable.from_document({"format": "something-else"})


def test_ops_cli_lookup(capsys):
    assert main(["ops", "aten::lerp.Scalar_out"]) == 0
    out = capsys.readouterr().out
    assert "aten::lerp.Scalar_out: fallback" in out and "CPU" in out


def test_ops_cli_json(capsys):
    assert main(["ops", "lerp.Scalar_out", "aten.add.out", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(o["op"], o["kind"]) for o in doc["ops"]] == [("aten::lerp.Scalar_out", "fallback"), ("aten::add.out", "native")]


def test_ops_cli_unknown_op_is_one_line_exit_2(capsys):
    assert main(["ops", "aten::no_such_op"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "aten::no_such_op" in captured.err
    assert "Traceback" not in captured.err


def test_ops_cli_lists_kinds(capsys):
    assert main(["ops", "--backend", "dml", "--fallback"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == load_table("dml").ops("fallback") and len(listed) == 593
    assert main(["ops", "--native", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == 296 and "aten::add.out" in doc["ops"]


def test_live_table_reads_this_dispatcher():
    from dmlprof.tables import live_table
    from dmlprof.tables._dispatch_read import read_dispatch_table

    table = live_table("PrivateUse1")
    assert table.source == "live" and "live" in table.version_label()
    assert table.kind("aten::linear") == "composite_implicit"
    # The dump's tags and the registration queries agree on every op of this torch.
    assert read_dispatch_table("PrivateUse1")["disagreements"] == []


def test_extract_document_shape():
    from dmlprof.tables.extract import SPECS, build_document, output_path

    reading = {"ops": {"aten::b": "fallback", "aten::a": "native"}, "torch_version": "2.4.1",
               "registrations": {"PrivateUse1": ["aten::a"], "AutogradPrivateUse1": []}}
    doc = build_document("dml", SPECS["dml"], reading)
    assert list(doc["ops"]) == ["aten::a", "aten::b"]
    assert doc["counts"] == {"native": 1, "fallback": 1, "composite_explicit": 0, "composite_implicit": 0}
    assert output_path(SPECS["dml"]).name == "torch_directml-0.2.5.dev240914.json"
    assert OpTable.from_document(doc).kind("a") == "native"
