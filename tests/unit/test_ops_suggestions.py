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
