"""``dmlprof scan --replace``: scan a model file as it is, then with the replacements applied, and compare.

Orchestration beside the runner: the replacements themselves are a library
(:mod:`dmlprof.replacements`), the comparison is analysis
(:mod:`dmlprof.analysis.replace`) and the report formats it. The comparison
is stored in the patched run's ``session.extras["replace"]``.
"""
from __future__ import annotations

from typing import Optional

from dmlprof import progress
from dmlprof.analysis.replace import replace_comparison, run_numbers
from dmlprof.errors import DeviceError, ModelRaisedError
from dmlprof.model_file import inspect_model_file
from dmlprof.replacements import advice_for
from dmlprof.runner import ScanStopped, scan


def scan_replaced(path, device: str = "auto", **options):
    """Scan ``path`` twice, plain and patched; returns the patched Session with ``extras["replace"]``
    holding the comparison. ``options`` are :func:`dmlprof.runner.scan`'s.

    A model file gets ``dmlprof.patch(model, optimizer)`` plus its loss under the replacements; a
    script runs entirely under the replacement mode."""
    contract = inspect_model_file(path).mode == "contract"
    before_error = None
    try:
        with progress.stage("plain scan"):
            try:
                before = scan(path, device, **options)
            except (ModelRaisedError, DeviceError):  # failed while warming up: record up to the failure instead
                before = scan(path, device, **dict(options, warmup=0))
    except ScanStopped as stopped:  # e.g. a fallback with no CPU kernel behind it: compare with what ran
        before, before_error = stopped.session, str(stopped.cause).splitlines()[0][:300]
    applied: list = []
    with progress.stage("patched scan"):
        after = _scan_patched(path, device, contract, options, applied)
    after.meta = after.meta.updated(replacements_applied=len(applied))
    after.replace = replace_comparison(_numbers(before), _numbers(after), applied, advice_for)
    if before_error:
        after.replace["before"]["error"] = before_error
    return after


def _scan_patched(path, device: str, contract: bool, options: dict, applied: list):
    """The second scan, under the replacements; what was replaced is appended to ``applied``."""
    if contract:
        return scan(path, device, prepare=lambda training: apply_to_training_step(training, applied), **options)
    # A script builds its own model and optimizer, out of reach: run all of it under the
    # replacement mode instead, which covers functional calls, RNNs and the optimizer's lerp
    # (not a fused optimizer, which needs the optimizer object).
    from dmlprof.replacements.patching import ReplacementMode

    applied.append({"target": "script", "what": "every torch call runs under the replacements"})
    with ReplacementMode():
        return scan(path, device, **options)


def apply_to_training_step(training, applied: Optional[list] = None):
    """Patch a :class:`dmlprof.runner.TrainingStep`: its model and optimizer (``dmlprof.patch``) and its loss."""
    from dmlprof.replacements.patching import patch, replaced_call

    handle = patch(training.model, training.optimizer)
    training.loss_fn = replaced_call(training.loss_fn)
    if applied is not None:
        applied.extend(handle.applied + [{"target": "loss", "what": "loss runs under the replacements"}])
    return handle


def _numbers(session) -> dict:
    return run_numbers(session.ops, session.meta.steps or 1, session.meta.step_times_ms)
