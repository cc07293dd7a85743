"""``dmlprof ops NAME``: every overload for a bare name, close and partial names when nothing matches."""
from __future__ import annotations

from dmlprof.cli import main


def test_a_bare_name_lists_every_overload(capsys):
    assert main(["ops", "lerp"]) == 0
    out = capsys.readouterr().out
    assert "aten::lerp.Scalar_out: fallback" in out and "aten::lerp.Tensor" in out


def test_a_misspelt_name_suggests_close_ones(capsys):
    assert main(["ops", "lerpp"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dmlprof: error: aten::lerpp is not in the") and "did you mean aten::lerp," in err
    assert len(err.splitlines()) == 1


def test_part_of_a_name_suggests_the_names_that_contain_it(capsys):
    assert main(["ops", "group_norm_back"]) == 2
    assert "aten::native_group_norm_backward" in capsys.readouterr().err


def test_a_name_like_nothing_says_so_without_suggestions(capsys):
    assert main(["ops", "zzzzqqq"]) == 2
    err = capsys.readouterr().err
    assert "did you mean" not in err and "check the spelling" in err


def test_a_composite_is_followed_to_the_op_that_falls_back_and_its_fix(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # each entry on one line (a narrower terminal wraps them)
    # GIVEN Adam's per-parameter update, a composite: the table alone says nothing falls back there
    assert main(["ops", "_foreach_lerp_.Scalar"]) == 0
    out = capsys.readouterr().out.splitlines()
    # THEN it is followed through torch's per-tensor loop to the out= form that falls back, with the fix
    assert out[2] == ("  reaches: aten::lerp_.Scalar (one call per tensor) -> aten::lerp.Scalar_out (its out= form): "
                      "fallback")
    assert out[3].startswith("  fix: Adam/AdamW's moment update (lerp)")


def test_a_composite_that_stays_on_the_device_has_no_fix(capsys):
    assert main(["ops", "add_.Tensor", "--json"]) == 0
    import json

    (item,) = json.loads(capsys.readouterr().out)["ops"]
    assert item["reaches"] == [{"op": "aten::add.out", "how": "its out= form", "kind": "native"}]
    assert item["fix"] is None


def test_an_op_that_falls_back_itself_names_its_fix(capsys):
    assert main(["ops", "native_group_norm_backward"]) == 0
    out = capsys.readouterr().out
    assert "reaches" not in out and "fix: GroupNorm's backward falls back" in out


def test_the_table_follows_only_what_torchs_names_tell():
    from dmlprof.tables import load_table

    table = load_table("dml")
    assert table.reaches("aten::lerp.Scalar_out") == ()  # not composite: nothing to follow
    assert table.reaches("aten::linear") == ()  # implicit: decomposed above the backend, not followed
    assert table.reaches("aten::_foreach_lerp_.List") == (("aten::lerp_.Tensor", "one call per tensor"),
                                                          ("aten::lerp.Tensor_out", "its out= form"))


def test_an_ops_description_fits_the_terminals_width(capsys, monkeypatch):
    """``dmlprof ops eye`` printed its rules and measured rows as lines of up to 250 characters, whatever the
    terminal's width (issue 37): they wrap to it, as scan's and check's lines do, and every word is kept."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["ops", "eye", "_thnn_fused_lstm_cell"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert sum(len(line) > 78 for line in lines) < len(lines)  # not cut to the width: wrapped
    words = " ".join(out.split())
    assert "fix: nn.LSTM/nn.GRU and their cells use fused cells" in words
    assert "rule (raises or aborts) aten::eye: ``torch.eye(n, device=dml)``" in words
