"""The terminal report fits the terminal: no line wider than it, names wrapped or cut where they give way."""
from __future__ import annotations

import pytest

from dmlprof.render.format import KEEP_END, WRAP, TableSpec, terminal_width
from dmlprof.render.terminal import render_text
from session_kinds import KINDS


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("kind", list(KINDS))
def test_no_line_is_wider_than_the_terminal(kind, width):
    lines = render_text(KINDS[kind](), width=width).splitlines()
    assert max(len(line) for line in lines) <= width


def test_the_width_is_read_from_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    assert terminal_width() == 90
    lines = render_text(KINDS["live_dml"]()).splitlines()
    assert max(len(line) for line in lines) <= 90 < max(len(line) for line in render_text(KINDS["live_dml"](), width=200).splitlines())


def test_a_terminal_too_narrow_for_any_table_is_laid_out_at_the_narrowest_width():
    assert terminal_width(20) == 60


def test_the_fix_of_each_hotspot_is_whole_and_right_under_the_table():
    text = render_text(KINDS["live_dml"](), width=80)
    hotspots = text.split("Fallback hotspots")[1].split("\n\n")[0]
    # wrapped, but every word of the advice is there, in order
    fix = " ".join(hotspots.split("fix aten::native_group_norm_backward:")[1].split("fix aten::lerp")[0].split())
    assert fix.startswith("GroupNorm's backward falls back: dmlprof.patch(model, optimizer) swaps")
    assert fix.endswith("(native forward, backward from mul/mean/sum)")


def test_wrapped_names_keep_every_character_and_cut_ones_keep_their_end():
    name, source = "aten::native_group_norm_backward", "models/some/long/path/groupnorm_net.py:40"
    spec = TableSpec([[name, 2, "Net.features.0.0.1", source]], ["op", "calls", "module", "source"],
                     {"op": WRAP, "module": KEEP_END, "source": KEEP_END})
    text = spec.render(40)
    assert max(len(line) for line in text.splitlines()) <= 40
    op_cells = [line.split()[0] for line in text.splitlines()[2:] if line.strip()]
    assert "".join(op_cells) == name  # broken at natural points: native_ | group_ | norm_ ...
    assert all(cell.endswith(("_", "::")) for cell in op_cells[:-1])
    assert "...s.0.0.1" in text and "...t.py:40" in text  # the end of a path, its file and line, is kept


def test_a_table_that_fits_is_left_as_it_is():
    spec = TableSpec([["aten::add", 1]], ["op", "calls"], {"op": WRAP})
    assert spec.render(120) == spec.render(1000)


def test_names_in_other_scripts_print_as_written_and_invisible_controls_as_their_code():
    # A module named Modèle printed as "Mod?le" (the report was made ASCII); a right-to-left override in a
    # name must still not reach the terminal raw (it reorders what the line reads).
    from session_factory import make_session

    session = make_session([{"op": "aten::native_group_norm", "verdict": "fallback", "time_ns": 9_000,
                             "module": "Modèle.norme_é", "source": "g.py:10"},
                            {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 8_000,
                             "module": "Net.\u202eevil", "source": "g.py:11"}])
    text = render_text(session, width=200)
    assert "Modèle.norme_é" in text
    assert "\u202e" not in text and "Net.\\u202eevil" in text
