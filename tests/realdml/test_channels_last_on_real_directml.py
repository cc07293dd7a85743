"""A channels-last tensor asked of DirectML, judged by real torch-directml (issue 32).

GIVEN tests/fixtures/channels_last_calls.py: 32 ways to ask for a channels-last tensor on the device
WHEN  they run on real torch-directml without dmlprof, through dmlprof's live path (--device dml), and on the
      prediction (--target dml) and the emulated device (--device emulated-dml)
THEN  real torch-directml does what MEASURED says; the live path says the same call for call (a channels-last
      bfloat16 copy raises there: it is not refused as a process-ending call); the prediction and the emulated device
      say the same but the two KNOWN differences; and a script that makes its model channels-last after moving it
      stops at that line on every path, with the remedy.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_channels_last_on_stand_ins import CALLS, calls_module, verdicts

pytestmark = [pytest.mark.realdml, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
AFTER_MOVE = REPO / "tests" / "fixtures" / "channels_last_after_move.py"
#: the line of AFTER_MOVE that torch-directml refuses
REFUSED_LINE = 10


def _run(arguments: list, env: dict, out_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=900)


def _stand_in_env() -> dict:
    """This process's environment with the repository importable: the stand-ins need no realdml stack."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_every_path_says_what_real_torch_directml_does_with_each_channels_last_call(realdml, tmp_path):
    calls = calls_module()
    real = _run([str(CALLS)], realdml, tmp_path)
    assert real.returncode == 0, real.stderr[-2000:]
    said_real = verdicts(real.stdout)
    assert said_real == calls.MEASURED
    scan = ["-m", "dmlprof", "scan", str(CALLS), "--steps", "1", "--warmup", "0", "--quiet", "--no-profiler",
            "--out", str(tmp_path)]
    live = _run(scan + ["--device", "dml"], realdml, tmp_path)
    assert live.returncode == 0, live.stderr[-2000:]
    assert verdicts(live.stdout) == said_real
    for path in (["--target", "dml"], ["--device", "emulated-dml"]):
        done = _run(scan + path, _stand_in_env(), tmp_path)
        assert done.returncode == 0, (path, done.stderr[-2000:])
        said = verdicts(done.stdout)
        differs = {name: (said[name], said_real[name]) for name in said_real if said[name] != said_real[name]}
        assert differs == {name: (known, said_real[name]) for name, known in calls.KNOWN.items()}, path


@pytest.mark.parametrize("path", [["--device", "dml"], ["--target", "dml"], ["--device", "emulated-dml"]],
                         ids=["real", "predicted", "emulated"])
def test_a_model_made_channels_last_after_its_move_stops_at_that_line_with_the_remedy(realdml, path, tmp_path):
    env = realdml if path == ["--device", "dml"] else _stand_in_env()
    done = _run(["-m", "dmlprof", "scan", str(AFTER_MOVE), *path, "--quiet", "--out", str(tmp_path)], env, tmp_path)
    error = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 4, done.stderr[-2000:]
    assert f"at aten::_to_copy, {AFTER_MOVE.relative_to(REPO).as_posix()}:{REFUSED_LINE})" in error, error
    assert "convert on the CPU before moving" in error and "drop memory_format=torch.channels_last" in error, error
