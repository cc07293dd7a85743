"""The script's child starts with every option python was given (re-probe 8).

GIVEN python started with -X options multiprocessing's helper does not pass on, or with -P
WHEN  dmlprof starts the child that runs the script, and puts the script's folder on sys.path
THEN  the script sees the interpreter plain python would give it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python(*options: str, code: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, *options, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_every_x_option_reaches_the_child_not_only_the_six_subprocess_passes_on():
    # -X int_max_str_digits was dropped: int('9' * 5000) raised in the scanned script, not under plain python
    said = _python("-X", "int_max_str_digits=5000", "-X", "warn_default_encoding", "-X", "utf8",
                   code="from dmlprof.survival import interpreter_options; print(interpreter_options())")
    options = eval(said)  # a list's repr, printed by our own code
    assert "int_max_str_digits=5000" in options and "warn_default_encoding" in options
    assert options.count("utf8") == 1  # the one subprocess passes on is not passed twice
    # and the child started with them has them
    child = _python(*options, code="import sys; print(sys.flags.int_max_str_digits, sys.flags.warn_default_encoding)")
    assert child == "5000 1"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P is 3.11's")
def test_python_dash_p_puts_no_script_folder_first():
    code = ("import sys; from pathlib import Path; from dmlprof.runner.user_code import script_context\n"
            "before = sys.path[:]\n"
            "with script_context(Path('tests/unit/x.py'), []): print(sys.path == before)")
    assert _python("-P", code=code) == "True"
    assert _python(code=code) == "False"  # without -P the script's folder is first, as python puts it


def test_a_script_in_its_declared_encoding_or_with_a_byte_order_mark_is_read_as_python_reads_it(tmp_path):
    # reprobe8: both were refused (exit 2): "not UTF-8 text", and for the mark a "syntax error ... U+FEFF (python
    # shows the same)", though python runs them
    from dmlprof.errors import ModelFileError
    from dmlprof.model_file import parse_python

    declared = tmp_path / "latin.py"
    declared.write_bytes(b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n")
    marked = tmp_path / "marked.py"
    marked.write_bytes(b"\xef\xbb\xbfname = 'x'\n")
    for path in (declared, marked):
        assert parse_python(path).body[-1].targets[0].id == "name"
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"name = '\xff\xfe'\n")  # not UTF-8, and declares nothing else
    with pytest.raises(ModelFileError, match="not a Python file"):
        parse_python(binary)
