"""The user's line of a call made through dmlprof's own code inside the user's call (``--from cuda``'s remapping,
the torch_directml stand-in, a replacement op) is still the user's line; dmlprof's runner ends the walk."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import dmlprof
from dmlprof.record.attribution import user_source_line

DMLPROF_DIR = Path(dmlprof.__file__).resolve().parent
TORCH_INIT = Path(torch.__file__).resolve().parent / "nn" / "init.py"


def _function(name: str, body: str, filename: Path, scope: dict):
    """A function whose frames read as ``filename``'s (how the walk tells whose code a frame is)."""
    exec(compile(f"def {name}():\n    {body}\n", str(filename), "exec"), scope)
    return scope[name]


@pytest.mark.parametrize("between, expected", [
    (DMLPROF_DIR / "backends" / "remap.py", "user"),  # nn.Linear(...) under --from cuda: init -> remap -> init
    (DMLPROF_DIR / "backends" / "directml_shim.py", "user"),
    (DMLPROF_DIR / "replacements" / "patching.py", "user"),
    (DMLPROF_DIR / "runner" / "contract.py", ""),  # dmlprof's runner calling torch itself: nobody's line
])
def test_the_users_line_is_found_through_dmlprof_code_that_runs_inside_the_users_call(tmp_path, between, expected):
    scope: dict = {"user_source_line": user_source_line}
    # GIVEN user code -> torch -> dmlprof code -> torch -> the recorder asking whose line it is
    _function("innermost", "return user_source_line(1)", TORCH_INIT, scope)
    # (code objects equal in content compare equal whatever their file: the body names its file to stay apart)
    _function("middle", f"return ({str(between)!r}, innermost())[1]", between, scope)
    _function("outer_torch", "return middle()", TORCH_INIT, scope)
    user_file = tmp_path / "train.py"
    _function("users_line", "return outer_torch()", user_file, scope)
    found = scope["users_line"]()
    if expected:
        assert found.endswith("train.py:2"), found
    else:
        assert found == ""
