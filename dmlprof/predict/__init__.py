"""Predicted coverage: ``dmlprof scan MODEL.py --target dml`` on a machine without the device.

The model file's training step runs through the ordinary runner and recorder
on a stand-in ``privateuseone`` device (:mod:`dmlprof.predict.backend`):
torch-directml's exact kernel registrations as Python kernels that compute
shapes but no values, so torch makes every device-dependent choice it makes on
DirectML, and the ops that would fall back are named by the stand-in's own
fallback kernel. The Session has ``meta.is_prediction`` (its kind is ``predicted``) and no times
(every timing column is 0, ``device_time_ns`` empty).
"""
from __future__ import annotations

import sys

from typing import Optional

from dmlprof.errors import DmlprofError

#: DirectML's prediction (its measured wing); every other target is a table and a semantics module
#: (:func:`known_targets`, docs/targets.md)
DML_TARGET = "dml"
DEFAULT_STEPS = 1
#: one unrecorded step first, as a live scan takes: the predicted step is the steady one (optimizer
#: state built), not the first
DEFAULT_WARMUP = 1


class PredictionError(DmlprofError):
    """The prediction could not be made."""


def predict_scan(path, target: str = "dml", batch_size: Optional[int] = None, steps: Optional[int] = None,
                 warmup: Optional[int] = None, float64: bool = False, values_budget_bytes: Optional[int] = None,
                 capture=None, target_torch: Optional[str] = None, **script_options):
    """Predict a model file's training step on ``target`` without the device; returns a Session.

    ``values_budget_bytes``: how much memory the device's real values may take (None: the default,
    ``dmlprof.predict.values.VALUES_BUDGET_BYTES``; 0: none, every value read is made up).

    A script (no model contract) needs values, which a prediction does not
    have: it runs on the emulated DirectML device instead, and the session says
    so (``script_options`` are the script's: ``script_args``, ``run_to_end``,
    ``remap_from``). Raises :class:`~dmlprof.errors.DmlprofError` for anything
    the user can fix; a step that would fail on the device raises
    ``ScanStopped`` with the predicted calls up to the failing one. ``float64`` predicts an adapter
    that runs float64 (most integrated GPUs do not; what fails depends on it). ``capture``: a
    :class:`dmlprof.confirm.signatures.SignatureCapture` that keeps each recorded call's signature and values
    (``scan --confirm``; a model file only). ``target_torch``: for a target other than DirectML, the torch
    version whose registrations it is read from (None: the newest shipped).
    """
    from dmlprof.meta import Prediction
    from dmlprof.model_file import inspect_model_file
    from dmlprof.predict.compiled import compiled_code_runs_eagerly
    from dmlprof.runner import DEFAULT_STEPS as SCRIPT_STEPS, DEFAULT_WARMUP as SCRIPT_WARMUP, ScanStopped, scan

    if target not in known_targets():
        raise PredictionError(f"unknown target {target!r}; choose one of {', '.join(known_targets())}")
    if steps is not None and steps < 1:
        raise PredictionError("--steps must be at least 1")
    if target == DML_TARGET and target_torch is not None:  # a script too: it was ignored on the emulated device
        raise PredictionError("--target-torch names the torch of a target read from a wheel: torch-directml "
                              "0.2.5 runs on torch 2.4.1 only")
    is_script = inspect_model_file(path).mode == "script"
    if is_script and target != DML_TARGET:
        raise PredictionError(f"--target {target} predicts a model file (build_model, make_batch): a script needs "
                              "values, which a prediction does not compute, and only DirectML has an emulated device")
    if is_script:
        session = scan(path, "emulated-dml", batch_size=batch_size, steps=steps or SCRIPT_STEPS,
                       warmup=SCRIPT_WARMUP if warmup is None else warmup, **script_options)
        session.meta = session.meta.updated(prediction=Prediction(target=target),
                                            notes=(SCRIPT_NOTE,) + session.meta.notes)
        return session
    values = None
    if values_budget_bytes is not None:
        from dmlprof.predict.values import ValueStore

        values = ValueStore(max_bytes=values_budget_bytes)
    backend = _predicted_backend(target, float64, values, target_torch)
    backend.prepare()
    if capture is not None:  # scan --confirm: every recorded call's signature, read through the stand-in's values
        capture.read_values, capture.device_type = backend.read_values, backend.device_type
        backend.capture = capture
    # Inductor cannot build code for a stand-in; torch-directml's Dynamo fails on most compiled calls
    storage_less = backend.device_type if target == DML_TARGET else None
    with compiled_code_runs_eagerly(storage_less) as compiled:
        try:
            session = scan(path, backend=backend, batch_size=batch_size, steps=steps or DEFAULT_STEPS,
                           warmup=DEFAULT_WARMUP if warmup is None else warmup, sync=False, profiler=False)
        except ScanStopped as stopped:
            stopped.session.meta = _with_grounds(stopped.session, backend, float64, compiled)
            raise
    session.meta = _with_grounds(session, backend, float64, compiled)
    return session


def known_targets() -> tuple:
    """``--target`` choices: DirectML's, then every target a table was shipped for (torch-free)."""
    from dmlprof.tables.targets import shipped_target_tables

    return (DML_TARGET,) + tuple(shipped_target_tables())


def _predicted_backend(target: str, float64: bool, values, target_torch: Optional[str]):
    """The stand-in backend of ``target``: DirectML's with its measured knowledge, any other from its table
    and semantics module."""
    if target == DML_TARGET:
        from dmlprof.predict.backend import PredictedDmlBackend

        return PredictedDmlBackend(float64_support=float64, values=values)
    if float64:
        raise PredictionError("--adapter says which DirectML adapter a prediction assumes: it needs --target dml")
    testing = sys.modules.get("dmlprof.testing")
    if testing is not None and testing.is_loaded():
        # its kernels serve every op torch-directml registers, and would run on this stand-in's storage-less
        # tensors wherever the target has no kernel of its own (a segfault, measured): one process, one device
        raise PredictionError(f"--target {target} cannot be predicted in a process where the emulated DirectML device "
                              "is loaded", remedy="predict it with a dmlprof command of its own")
    from dmlprof.predict.targets import PredictedTargetBackend
    from dmlprof.targets import semantics_for

    return PredictedTargetBackend(semantics_for(target, target_torch), values=values)


def _with_grounds(session, backend, float64: bool, compiled):
    """The session's metadata with what its verdicts rest on: a target's provenance and setting, or DirectML's
    adapter note; and, where the model compiled anything, that it was predicted as eager calls."""
    notes = getattr(backend, "notes", None)
    meta = _with_adapter_note(session, float64) if notes is None else session.meta.updated(
        notes=tuple(notes()) + session.meta.notes)
    if not compiled.compiled:
        return meta
    device = "DirectML" if notes is None else backend.semantics.title
    return meta.updated(notes=meta.notes + (compiled.note(device),))


def _with_adapter_note(session, float64: bool):
    """What the other adapter class (float64 or not) would change in this prediction, as a note."""
    failure = session.meta.device_failure
    if not float64:
        if failure is None or _FLOAT64_MARKER not in failure.message:
            return session.meta  # nothing on the device asked for float64: both classes agree
        note = (f"adapter: predicted for one without float64 (--adapter no-float64, the default); on an adapter that "
                f"runs float64 (--adapter float64) {failure.op} runs and the step goes on")
    else:
        ops = session.ops
        on_device = ops[ops["dtypes"].str.contains("float64", regex=False)
                        & ops["output_devices"].str.contains(session.meta.device.device or "privateuseone",
                                                             regex=False)]
        if on_device.empty:
            return session.meta
        first = on_device.iloc[0]
        where = f" ({first['source']})" if first["source"] else ""
        note = (f"adapter: predicted for one that runs float64 (--adapter float64); on an adapter without float64 "
                f"(the default, many integrated GPUs) the step stops at {first['op']}{where}")
    return session.meta.updated(notes=session.meta.notes + (note,))


_FLOAT64_MARKER = "Float64"

SCRIPT_NOTE = ("--target dml on a script: a script needs values (its data, its control flow), which a prediction "
               "does not compute, so it ran on dmlprof's emulated DirectML device (torch-directml's kernels, "
               "CPU memory); its verdicts are what the device does, its times are the host CPU's")


__all__ = ["predict_scan", "PredictionError", "known_targets", "DML_TARGET"]
