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


def _usage_error(capsys, *argv) -> str:
    from dmlprof.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(list(argv))
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dmlprof: error: ")
    return lines[0]


def test_a_scripts_own_arguments_without_the_separator_get_the_hint(capsys):
    line = _usage_error(capsys, "scan", "train.py", "--epochs", "1")
    assert "unrecognized arguments: --epochs 1" in line
    assert "a script's own arguments go after --: dmlprof scan train.py -- --epochs 1" in line
    assert "did you mean" not in line and "(see 'dmlprof scan --help')" in line


def test_a_mistyped_flag_gets_did_you_mean_and_no_script_hint(capsys):
    line = _usage_error(capsys, "check", "model.py", "--max-fallback-opps", "0")
    assert "--max-fallback-opps: did you mean --max-fallback-ops?" in line and "go after --" not in line


def test_a_flag_like_one_of_dmlprofs_may_still_be_the_scripts(capsys):
    line = _usage_error(capsys, "scan", "train.py", "--max-steps", "5", "--lr=0.1")
    assert "--max-steps: did you mean --steps?" in line and "dmlprof scan train.py -- --max-steps 5 --lr=0.1" in line


def test_commands_without_a_script_get_no_script_hint(capsys):
    line = _usage_error(capsys, "report", "s.session.json", "--jsn", "out.json")
    assert "--jsn: did you mean --json?" in line and "go after --" not in line


@pytest.mark.parametrize("argv, meant", [(("scna", "m.py"), "scan"), (("scan", "m.py", "--device", "dlm"), "dml")])
def test_a_mistyped_command_or_choice_gets_did_you_mean(capsys, argv, meant):
    assert _usage_error(capsys, *argv).endswith(f"; did you mean {meant}? (see 'dmlprof{' scan' if len(argv) > 2 else ''} --help')")


def test_a_flag_of_another_command_says_whose_it_is(capsys):
    # `sweep --target dml m.py` read "dml" as the model and said only "unrecognized arguments: --target m.py"
    line = _usage_error(capsys, "sweep", "--batch-sizes", "4,8", "--target", "dml", "m.py")
    assert "--target is an option of dmlprof scan and check, not of sweep" in line
    assert "did you mean" not in line and "go after --" not in line
