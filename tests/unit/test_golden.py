"""Golden tests: every report, for every kind of session, compared with the text in tests/golden/.

They pin what a user sees while the code behind it moves. A change to a
report shows up here as a diff; when the change is meant, rewrite the files
with ``DMLPROF_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_golden.py``
and say in the commit why the output changed.
"""
from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest

from session_kinds import KINDS, OP_KINDS

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
UPDATE = os.environ.get("DMLPROF_UPDATE_GOLDEN") == "1"


def check_golden(relative: str, text: str) -> None:
    """Compare ``text`` with the golden file (or rewrite it when DMLPROF_UPDATE_GOLDEN=1)."""
    path = GOLDEN / relative
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        return
    assert path.is_file(), f"no golden file {path}: run with DMLPROF_UPDATE_GOLDEN=1 to write it"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "\n".join(difflib.unified_diff(expected.splitlines(), text.splitlines(), f"golden/{relative}",
                                              "rendered now", lineterm=""))
        pytest.fail(f"{relative} differs from the golden file:\n{diff}")


def _json(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


#: an 80-column console, and the 120 of a default Windows console (where most DirectML users are)
WIDTHS = (80, 120)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", OP_KINDS)
def test_terminal_report_matches_golden(kind, width):
    from dmlprof.render.terminal import render_text

    text = render_text(KINDS[kind](), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    check_golden(f"terminal/{width}/{kind}.txt", text + "\n")


@pytest.mark.parametrize("width", WIDTHS)
def test_sweep_text_matches_golden(width):
    from dmlprof.render.terminal import render_sweep_text

    text = render_sweep_text(KINDS["sweep"](), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    check_golden(f"sweep/sweep-{width}.txt", text + "\n")


def test_sweep_json_document_matches_golden():
    from dmlprof.render.json_report import render_json as render_sweep_json

    check_golden("sweep/sweep.json", _json(json.loads(render_sweep_json(KINDS["sweep"]()))))


@pytest.mark.parametrize("kind", list(KINDS))
def test_json_report_matches_golden(kind):
    from dmlprof.render.json_report import render_json

    check_golden(f"json/{kind}.json", _json(json.loads(render_json(KINDS[kind]()))))


@pytest.mark.parametrize("kind", list(KINDS))
def test_html_report_data_matches_golden(kind):
    from dmlprof.render.html import report_data, script_json

    # script_json is what the page inlines: the data exactly as the browser gets it
    check_golden(f"html/{kind}.json", _json(json.loads(script_json(report_data(KINDS[kind]())))))


@pytest.mark.parametrize("fmt", ["txt", "txt-80", "json", "html"])
def test_merged_job_report_matches_golden(fmt, tmp_path):
    """A launched job's merged report: a straggling rank whose extra time is fallbacks, and a rank that failed."""
    from dmlprof.render.html import render_html
    from dmlprof.render.json_report import render_json
    from dmlprof.render.terminal import render_text
    from dmlprof.report import merged_report
    from session_kinds import job_run, rank_session

    run = job_run(tmp_path, {0: rank_session(0), 1: rank_session(1, fallback_ms=20.0)},
                  errors=[(2, "rank 2: ProcessGroupGloo timed out")])
    # the renderers of one run's report, given every rank as one value
    render = {"txt": lambda r: render_text(r, width=120) + "\n", "txt-80": lambda r: render_text(r, width=80) + "\n",
              "json": render_json, "html": render_html}[fmt]
    name = "merged-80.txt" if fmt == "txt-80" else f"merged.{fmt}"  # the text at 120 columns and at 80
    rendered = render(merged_report(run))
    if fmt.startswith("txt"):  # laid out as every text report is: no line wider than the terminal
        assert max(len(line) for line in rendered.splitlines()) <= (80 if fmt == "txt-80" else 120)
    check_golden(f"job/{name}", rendered.replace(str(tmp_path), "<run folder>"))
