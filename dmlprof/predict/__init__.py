"""Predicted coverage: ``dmlprof scan MODEL.py --target dml`` on a machine without the device.

The model file's training step runs through the ordinary runner and recorder
on a stand-in ``privateuseone`` device (:mod:`dmlprof.backends.predicted`):
torch-directml's exact kernel registrations as Python kernels that compute
shapes but no values, so torch makes every device-dependent choice it makes on
DirectML, and the ops that would fall back are named by the stand-in's own
fallback kernel. The Session has ``meta["mode"] == "predicted"`` and no times
(every timing column is 0, ``device_time_ns`` empty).
"""
from __future__ import annotations

from typing import Optional

from dmlprof.errors import DmlprofError

TARGETS = ("dml",)
DEFAULT_STEPS = 1
#: one unrecorded step first, as a live scan takes: the predicted step is the steady one (optimizer
#: state built), not the first
DEFAULT_WARMUP = 1


class PredictionError(DmlprofError):
    """The prediction could not be made."""


def predict_scan(path, target: str = "dml", batch_size: Optional[int] = None, steps: Optional[int] = None,
                 warmup: Optional[int] = None, **script_options):
    """Predict a model file's training step on ``target`` without the device; returns a Session.

    A script (no model contract) needs values, which a prediction does not
    have: it runs on the emulated DirectML device instead, and the session says
    so (``script_options`` are the script's: ``script_args``, ``run_to_end``,
    ``remap_from``). Raises :class:`~dmlprof.errors.DmlprofError` for anything
    the user can fix; a step that would fail on the device raises
    ``ScanStopped`` with the predicted calls up to the failing one.
    """
    from dmlprof.backends.predicted import PredictedDmlBackend
    from dmlprof.meta import Prediction
    from dmlprof.model_file import inspect_model_file
    from dmlprof.runner import DEFAULT_STEPS as SCRIPT_STEPS, DEFAULT_WARMUP as SCRIPT_WARMUP, scan

    if target not in TARGETS:
        raise PredictionError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if steps is not None and steps < 1:
        raise PredictionError("--steps must be at least 1")
    if inspect_model_file(path).mode == "script":
        session = scan(path, "emulated-dml", batch_size=batch_size, steps=steps or SCRIPT_STEPS,
                       warmup=SCRIPT_WARMUP if warmup is None else warmup, **script_options)
        session.meta = session.meta.updated(prediction=Prediction(target=target),
                                            notes=(SCRIPT_NOTE,) + session.meta.notes)
        return session
    backend = PredictedDmlBackend()
    backend.prepare()
    return scan(path, backend=backend, batch_size=batch_size, steps=steps or DEFAULT_STEPS,
                warmup=DEFAULT_WARMUP if warmup is None else warmup, sync=False, profiler=False)


SCRIPT_NOTE = ("--target dml on a script: a script needs values (its data, its control flow), which a prediction "
               "does not compute, so it ran on dmlprof's emulated DirectML device (torch-directml's kernels, "
               "CPU memory); its verdicts are what the device does, its times are the host CPU's")


__all__ = ["predict_scan", "PredictionError", "TARGETS"]
