"""The real torch-directml lane: tests judged by torch-directml itself (docs/realdml.md).

They need torch-directml 0.2.5 on torch 2.4.1 in this Python and a D3D12 provider for it: on Linux,
realdml's folder (``tools/realdml/build.sh``, default ``~/.cache/realdml``; ``DMLPROF_REALDML`` moves
it), whose ``env.sh`` every scan here is run under. Where either is missing the tests skip, saying
why, unless ``DMLPROF_REALDML_STRICT=1`` (CI's real-DirectML lane) makes that a failure.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STRICT_ENV = "DMLPROF_REALDML_STRICT"
HOME_ENV = "DMLPROF_REALDML"
TIMEOUT_S = 1500


def realdml_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".cache" / "realdml")


def _missing() -> str:
    import importlib.util

    if sys.platform != "linux":
        return "realdml runs on Linux"
    if importlib.util.find_spec("torch_directml") is None:
        return "torch-directml is not installed in this Python"
    if not (realdml_home() / "env.sh").is_file():
        return f"no realdml build at {realdml_home()} (sh tools/realdml/build.sh; docs/realdml.md)"
    return ""


def _environment() -> dict:
    """This process's environment with realdml's ``env.sh`` applied (read by a POSIX shell, as users do)."""
    done = subprocess.run(["sh", "-c", '. "$1" && env -0', "sh", str(realdml_home() / "env.sh")],
                          capture_output=True, check=True)
    env = dict(item.split("=", 1) for item in done.stdout.decode("utf-8", "replace").split("\0") if "=" in item)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


@pytest.fixture(scope="session")
def realdml():
    """The environment a process needs to run on real torch-directml (skips, or fails when strict)."""
    missing = _missing()
    if missing:
        if os.environ.get(STRICT_ENV) == "1":
            pytest.fail(f"the real-DirectML lane must run here: {missing}")
        pytest.skip(f"needs real torch-directml: {missing}")
    return _environment()


class Scan:
    """One ``dmlprof scan`` in its own process: exit code, output, and the session it saved."""

    def __init__(self, done: subprocess.CompletedProcess, out: Path):
        self.returncode, self.stdout, self.stderr = done.returncode, done.stdout, done.stderr
        sessions = sorted(out.glob("*.session.json"))
        self.session = json.loads(sessions[-1].read_text(encoding="utf-8")) if sessions else None

    @property
    def meta(self) -> dict:
        """The run's facts under their JSON-report names (read through dmlprof's own session reader, as any
        consumer of a session file should: the file's layout is dmlprof's, docs/report_schema.md)."""
        from dmlprof.session import Session

        return Session.from_dict(self.session).meta.to_dict() if self.session else {}

    def calls(self) -> Counter:
        """Calls per (step, op, verdict, fallback ops) on the device: the session's rows, counted (autograd's
        gradient accumulation named as torch-directml calls it: ``dmlprof.testing.as_on_directml``)."""
        from dmlprof.testing import as_on_directml

        ops = (self.session or {}).get("ops") or {}
        keys = zip(ops.get("step", []), ops.get("op", []), ops.get("verdict", []), ops.get("fallback_ops", []),
                   ops.get("phase", []))
        return Counter((step, as_on_directml(op, phase), verdict, fallback)
                       for step, op, verdict, fallback, phase in keys if verdict not in ("cpu", "host"))

    def describe(self) -> str:
        return f"exit {self.returncode}; stderr: {self.stderr[-1500:]}"


@pytest.fixture
def scan(tmp_path, realdml):
    """``scan(file, *args, env={...})``: ``python -m dmlprof scan FILE ARGS`` under realdml's environment."""
    runs = iter(range(1000))

    def run(path, *args, env=None) -> Scan:
        out = tmp_path / f"run{next(runs)}"
        command = [sys.executable, "-m", "dmlprof", "scan", str(path), "--out", str(out), "--no-progress", *args]
        done = subprocess.run(command, cwd=tmp_path, env={**realdml, **(env or {})}, capture_output=True,
                              text=True, encoding="utf-8", errors="replace", timeout=TIMEOUT_S)
        return Scan(done, out)

    return run
