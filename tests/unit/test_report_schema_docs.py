"""The JSON documents dmlprof writes have exactly the keys their docs promise.

Read from docs/report_schema.md and docs/sweep_schema.md (the tables and key
lists a user reads), then checked against every kind of session.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from session_kinds import KINDS, OP_KINDS

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of any level."""
    start = text.index(heading + "\n") + len(heading) + 1
    following = re.search(r"^#{1,6} ", text[start:], re.MULTILINE)
    return text[start:start + following.start()] if following else text[start:]


def _names(text: str) -> list:
    """Backticked key names, leaving out what parentheses say about them (values, nested keys)."""
    previous = None
    while previous != text:  # innermost parentheses first
        previous, text = text, re.sub(r"\([^()]*\)", "", text)
    return re.findall(r"`([a-z_][a-z0-9_]*)`", text)


def _table(section: str) -> dict:
    """A markdown table's rows: each key in the first column -> the row's last column."""
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or set(cells[0]) <= {"-"} or cells[0] == "key":
            continue
        for name in _names(cells[0]):
            rows[name] = cells[-1]
    return rows


REPORT_DOC = (DOCS / "report_schema.md").read_text(encoding="utf-8")
TOP = _table(_section(REPORT_DOC, "## The JSON report (`--json FILE`), `schema_version` 1").split("### ")[0])
META = set(_names(_section(REPORT_DOC, "### `meta`")))
SUMMARY = set(_table(_section(REPORT_DOC, "### `summary`")))
#: the report's lists whose rows the top table spells out, key by key
ROW_KEYS = {name: set(_names(TOP[name].split(":", 1)[1])) for name in
            ("phases", "ops", "fallbacks", "transfers", "cpu_calls", "warnings")}
SWEEP_DOC = (DOCS / "sweep_schema.md").read_text(encoding="utf-8")
SWEEP_TOP = set(_table(_section(SWEEP_DOC, "## The `--json` document, `schema_version` 1")))
SWEEP_META = set(_names(_section(SWEEP_DOC, "### `meta`")))


def test_the_docs_were_read():
    # a parser that found nothing would make every test below pass vacuously
    assert {"schema_version", "meta", "summary", "ops", "fallbacks", "verification"} <= set(TOP)
    assert {"backend", "mode", "run_mode", "steady_state", "profiler_check"} <= META
    assert {"op_calls", "device_calls", "cpu_calls", "distinct_fallback_ops"} <= SUMMARY
    assert ROW_KEYS["fallbacks"] >= {"op", "inner_ops", "replacement"} and "h2d" not in ROW_KEYS["transfers"]
    assert {"format", "sweep", "details"} <= SWEEP_TOP and {"sweep_settings", "model_name"} <= SWEEP_META


def _report(kind: str) -> dict:
    from dmlprof.render.json_report import render_json

    return json.loads(render_json(KINDS[kind]()))


@pytest.mark.parametrize("kind", OP_KINDS)
def test_json_report_keys_are_the_documented_ones(kind):
    report = _report(kind)
    assert set(report) == set(TOP)
    assert set(report["meta"]) <= META, f"undocumented meta keys: {set(report['meta']) - META}"
    assert set(report["summary"]) == SUMMARY
    for name, keys in ROW_KEYS.items():
        for row in report[name]:
            assert set(row) == keys, f"{name}: {set(row) ^ keys}"


def test_every_documented_row_key_is_written_somewhere():
    # the other direction: no documented key that no kind of session ever writes
    seen = {name: set() for name in ROW_KEYS}
    for kind in OP_KINDS:
        report = _report(kind)
        for name in ROW_KEYS:
            for row in report[name]:
                seen[name] |= set(row)
    assert seen == ROW_KEYS


def test_sweep_json_keys_are_the_documented_ones():
    from dmlprof.render.json_report import render_json as render_sweep_json

    document = json.loads(render_sweep_json(KINDS["sweep"]()))
    assert set(document) == SWEEP_TOP
    assert set(document["meta"]) <= SWEEP_META, f"undocumented: {set(document['meta']) - SWEEP_META}"
