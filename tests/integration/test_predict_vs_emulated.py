"""Predicted fallbacks (``scan --target dml``) equal what the emulated DirectML device really sends to its fallback.

GIVEN a model file from models/
WHEN  the prediction runs in a fresh process through the CLI (so no PrivateUse1
      backend is loaded there: the user's situation), and the same training
      step runs on the emulated device (torch-directml's kernel names,
      counting fallback) in this process
THEN  the prediction's calls equal the emulated scan's, call for call (op,
      verdict, what fell back inside), and the set of ops predicted to fall back
      equals the set the emulated backend's fallback received (its counts'
      keys), on this torch.

Where the step fails on the device (an op falls back to a CPU that has no
kernel for it), both stop at the same call: the emulated scan raises and the
prediction exits with the same one-line error and a partial session.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dmlprof.analysis.core import fallback_op_set
from dmlprof.session import Session

REPO = Path(__file__).resolve().parents[2]
MODELS = sorted((REPO / "models").glob("*.py"))

pytestmark = [pytest.mark.live, pytest.mark.slow]


def _emulated_device():
    from dmlprof import testing

    problem = testing.build_problem()
    if problem:
        pytest.fail(f"the emulated DML device must build here: {problem}")
    testing.load()
    return testing


def _predict_in_fresh_process(model: Path, out_dir: Path) -> tuple:
    done = subprocess.run(
        [sys.executable, "-m", "dmlprof", "scan", str(model), "--target", "dml", "--steps", "1",
         "--out", str(out_dir), "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )
    saved = sorted(out_dir.glob("*.session.json"))
    assert len(saved) == 1, (done.returncode, done.stderr[-2000:])
    return done, Session.load(saved[0])


def _calls(session) -> list:
    """(op, verdict, fallback ops, phase) per call, autograd's gradient accumulation named as torch-directml
    calls it (the emulated device accumulates in place where it does not: dmlprof.testing.ACCUMULATES_IN_PLACE)."""
    from dmlprof.testing import as_on_directml

    ops = session.ops
    return [(as_on_directml(op, phase), verdict, fallback, phase)
            for op, verdict, fallback, phase in zip(ops["op"], ops["verdict"], ops["fallback_ops"], ops["phase"])]


@pytest.mark.parametrize("model", MODELS, ids=[p.stem for p in MODELS])
def test_predicted_fallbacks_equal_emulated_fallbacks(model, tmp_path):
    from dmlprof.runner import ScanStopped, scan

    testing = _emulated_device()
    done, predicted = _predict_in_fresh_process(model, tmp_path)
    assert predicted.meta.to_dict()["mode"] == "predicted"
    assert predicted.meta.to_dict()["table_version"].startswith("torch-directml 0.2.5.dev240914")

    stopped = None
    try:  # the prediction's defaults: one unrecorded step, one recorded
        testing.reset_fallback_counts()
        live = scan(model, device="emulated-dml", steps=1, warmup=1, profiler=False)
    except ScanStopped as exc:
        stopped, live = exc, exc.session
    emulated = set(testing.fallback_counts())

    assert _calls(predicted) == _calls(live)
    assert fallback_op_set(predicted.ops) == emulated
    # Stopping agrees too: a predicted failure is a real failure, and only then.
    assert (done.returncode != 0) == (stopped is not None), (done.stderr[-1000:], stopped)
    assert bool(predicted.meta.to_dict().get("partial")) == (stopped is not None)
    if stopped is not None:
        assert predicted.meta.to_dict()["failed_op"] in str(stopped)
