"""``--help`` reads as plain text with examples: no reST markup from the docstrings it is built from."""
from __future__ import annotations

import pytest

from dmlprof.cli import COMMANDS, build_parser, plain_text


def _help(command=None) -> str:
    parser = build_parser()
    if command is None:
        return parser.format_help()
    return next(a for a in parser._subparsers._group_actions if a.choices).choices[command].format_help()


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_has_no_rest_markup(command):
    text = _help(command)
    assert "``" not in text and ":func:" not in text and ":class:" not in text


@pytest.mark.parametrize("command", [None, "scan", "check", "ops"])
def test_help_shows_examples(command):
    text = _help(command)
    assert "examples:\n  dmlprof " in text


def test_markup_becomes_its_text():
    assert plain_text("``scan --replace`` and :func:`~dmlprof.x` and `y`") == "scan --replace and dmlprof.x and y"
