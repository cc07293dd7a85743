"""Shared test helpers: run the real CLI in a subprocess, find the repo's files."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "models"
FIXTURES = REPO / "tests" / "fixtures"


def run_cli(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    """``python -m dmlprof ARGS`` as a user would run it; never raises on a non-zero exit."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONIOENCODING", "utf-8")
    return subprocess.run(
        [sys.executable, "-m", "dmlprof", *map(str, args)],
        cwd=cwd, env=full_env, capture_output=True, text=True, encoding="utf-8", timeout=timeout,
    )


@pytest.fixture
def cli(tmp_path):
    """Run the CLI with the working directory in a fresh temporary folder."""
    def _run(*args, **kwargs):
        kwargs.setdefault("cwd", tmp_path)
        return run_cli(*args, **kwargs)

    return _run
