"""Predicted coverage: ``dmlprof scan MODEL.py --target dml`` on a machine without the device.

The model file's training step (forward, loss, backward, optimizer step) runs
on a stand-in ``privateuseone`` device whose tensors have meta storage (no
memory); below autograd a dispatch mode classifies every call against the
shipped op table (see :mod:`dmlprof.predict.mode`), and the rows become a
Session like a live scan's, with ``meta["mode"] == "predicted"``. Predicted
rows have no times: every timing column is 0 (``device_time_ns`` empty).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import platform
import time
from pathlib import Path
from typing import Optional

import torch

import dmlprof
from dmlprof.errors import DmlprofError, Interrupted, ModelFileError, ModelRaisedError
from dmlprof.model_file import describe_exception, import_model_module, inspect_model_file

TARGETS = ("dml",)
DEFAULT_STEPS = 1
UNKNOWN_NOTE = ("ops unknown to the table: this torch ({torch}) differs from the table's ({table}); "
                "torch-directml has no kernel for them, so they are predicted by this torch's composite "
                "kernel or as fallbacks. Exact answers need torch {table}.")
DRIFT_NOTE = ("drift_ops: the table's torch ({table}) ran these through a composite kernel, this torch ({torch}) "
              "has none; torch-directml has no kernel of its own for them, so they are predicted as fallbacks. "
              "Exact answers need torch {table}.")
PLACEHOLDER_NOTE = ("these ops have no meta kernel or their output depends on tensor data; they ran on the CPU "
                    "on placeholder zeros, so shapes and values after them may differ from a real run "
                    "(the op names recorded are still the ones the step calls)")


class PredictionError(DmlprofError):
    """The prediction could not be made."""


def predict_scan(path, target: str = "dml", batch_size: Optional[int] = None, steps: int = DEFAULT_STEPS):
    """Predict a model file's training step on ``target`` without the device; returns a Session.

    Raises :class:`~dmlprof.errors.DmlprofError` for anything the user can fix.
    """
    from dmlprof.predict.device import ensure_device
    from dmlprof.tables import load_table

    if target not in TARGETS:
        raise PredictionError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if steps is None or steps < 1:
        raise PredictionError("--steps must be at least 1")
    if batch_size is not None and batch_size < 1:
        raise PredictionError("--batch-size must be at least 1")
    model_file = inspect_model_file(path)
    if model_file.mode != "contract":
        raise ModelFileError(
            f"{model_file.path.name}: --target predicts from a model file (build_model, make_batch), "
            "not from a script; wrap the model in a model file (see docs/model_contract.md)"
        )
    table = load_table(target)
    how = ensure_device()
    return _Prediction(model_file.path, table, how).contract(batch_size=batch_size, steps=steps)


class _Prediction:
    def __init__(self, path: Path, table, how: dict):
        from dmlprof.predict.device import device_name

        self.path = path
        self.table = table
        self.device = torch.device(device_name(), 0)
        self.meta = {
            "dmlprof_version": dmlprof.__version__,
            "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            "platform": platform.platform(),
            "backend": table.backend,
            "device": str(self.device),
            "device_name": f"{table.package} (predicted, no device)",
            "backend_versions": {table.package.replace("-", "_"): table.package_version},
            "mode": "predicted",
            "run_mode": "contract",
            "target": table.backend,
            "model": str(path),
            "model_name": path.stem,
            "sync": False,
            "timing": "none: a predicted session has no times (time columns are 0)",
            "profiler": False,
            "started_at": _dt.datetime.now().isoformat(timespec="seconds"),
            "partial": False,
            "table_version": table.version_label(),
            "table_torch_version": table.torch_version,
            "stand_in_device": how.get("how", ""),
        }

    def _user_call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except KeyboardInterrupt:
            raise Interrupted("interrupted") from None
        except DmlprofError:
            raise
        except Exception as exc:
            raise ModelRaisedError(f"{what} raised {describe_exception(exc)}") from exc

    def contract(self, *, batch_size, steps: int):
        from dmlprof.predict.mode import PredictMode, PredictedFailure
        from dmlprof.runner import DEFAULT_BATCH_SIZE, _check_batch, _to_device, default_loss, default_optimizer

        started = time.perf_counter()
        module = import_model_module(self.path)
        model = self._user_call("build_model()", module.build_model)
        if not isinstance(model, torch.nn.Module):
            raise ModelFileError(f"{self.path.name}: build_model() must return an nn.Module, got {type(model).__name__}")
        batch_size = int(batch_size or getattr(module, "BATCH_SIZE", DEFAULT_BATCH_SIZE))
        inputs, target = _check_batch(self._user_call("make_batch()", module.make_batch, batch_size), self.path)
        loss_fn = getattr(module, "loss_fn", None) or default_loss
        make_optimizer = getattr(module, "make_optimizer", None) or default_optimizer
        mode = PredictMode(self.table, self.device)
        device = self.device
        with mode, _device_like_optimizers():
            model = self._user_call("moving the model to the device", _move_module, model, mode)
            model.train()
            optimizer = self._user_call("make_optimizer()", make_optimizer, model.parameters())
            mode.modules.name_tree(model)
            mode.modules.install()
            mode.optimizer_name = f"optimizer.{type(optimizer).__name__}"
            mode.recording = True
            try:
                for step in range(steps):
                    self.meta["steps"] = step
                    mode.step = step
                    mode.modules.reset_nodes()
                    mode.phase = "other"
                    device_inputs = _to_device(inputs, device)
                    device_target = _to_device(target, device)
                    mode.phase = "forward"
                    output = self._user_call(f"step {step + 1} (forward)", model, *device_inputs)
                    loss = self._user_call(f"step {step + 1} (loss)", loss_fn, output, device_target)
                    mode.phase = "backward"
                    with _backward_context():
                        self._user_call(f"step {step + 1} (backward)", loss.backward)
                    mode.phase = "optimizer"
                    self._user_call(f"step {step + 1} (optimizer)", optimizer.step)
                    mode.phase = "other"
                    optimizer.zero_grad(set_to_none=True)
            except PredictedFailure as failure:
                raise self._stopped(failure, mode, model, optimizer, module, batch_size, steps, started) from None
            finally:
                mode.recording = False
                mode.modules.remove()
        self._describe_run(model, optimizer, module, batch_size, steps, started)
        self.meta["steps"] = steps
        return self._finish(mode)

    def _stopped(self, failure, mode, model, optimizer, module, batch_size, steps, started):
        """The ScanStopped a live scan would raise, with the predicted rows up to the failing call."""
        from dmlprof.runner import ScanStopped

        where = f"step {mode.step + 1} ({mode.phase})"
        cause = ModelRaisedError(f"{where} {failure}", remedy=failure.remedy)
        self._describe_run(model, optimizer, module, batch_size, steps, started)
        self.meta.update(partial=True, partial_reason=cause.one_line(), predicted_failure_op=failure.op)
        return ScanStopped(cause, self._finish(mode))

    def _describe_run(self, model, optimizer, module, batch_size, steps, started) -> None:
        self.meta.update(
            batch_size=batch_size,
            warmup_steps=0,
            steps_requested=steps,
            optimizer=type(optimizer).__name__,
            loss_fn="loss_fn" if hasattr(module, "loss_fn") else "default",
            parameters=sum(p.numel() for p in model.parameters()),
            duration_s=round(time.perf_counter() - started, 3),
        )

    def _finish(self, mode):
        from dmlprof.record.frame import rows_to_frame
        from dmlprof.session import Session

        # The live recorder's builder, fed the table's verdicts as torch-directml's own warnings.
        ops = rows_to_frame(mode.rows, mode.warnings, _PredictedBackend(mode.device.type))
        ops["evidence"] = "table"
        ops["time_ns"] = 0
        ops["start_ns"] = 0
        unknown = sorted(mode.unknown_ops)
        drift = sorted(mode.drift_ops)
        self.meta.update(
            step_times_ms=[],
            memory={},
            warnings=[],
            unknown_ops=unknown,
            unknown_op_calls={name: mode.unknown_ops[name] for name in unknown},
            placeholder_ops=dict(sorted(mode.placeholder_ops.items())),
            drift_ops=drift,
        )
        notes = []
        if drift:
            notes.append(DRIFT_NOTE.format(torch=torch.__version__.split("+")[0], table=self.table.torch_version))
        if unknown:
            notes.append(UNKNOWN_NOTE.format(torch=torch.__version__.split("+")[0], table=self.table.torch_version))
        if mode.placeholder_ops:
            notes.append(PLACEHOLDER_NOTE)
        self.meta["notes"] = notes
        return Session(meta=dict(self.meta), ops=ops)


class _PredictedBackend:
    """What :func:`rows_to_frame` asks of a backend, for the predicted DirectML device."""

    fallback_warning_name = "DML"

    def __init__(self, device_type: str):
        self.device_type = device_type

    def is_accelerator(self) -> bool:
        return True

    def fallback_ops_in(self, message: str):
        from dmlprof.backends.dml import DmlBackend

        return DmlBackend.fallback_ops_in(self, message)


def _move_module(model: torch.nn.Module, mode) -> torch.nn.Module:
    """``model.to(device)`` for the predicted device: parameters and buffers become device tensors (meta storage)."""
    return model._apply(mode.to_device)


def _backward_context():
    from dmlprof.predict.device import backward_context

    return backward_context()


@contextlib.contextmanager
def _device_like_optimizers():
    """Let the optimizers see the device tensors as the plain tensors they are on the device.

    torch picks the foreach (or fused) path only for exact ``torch.Tensor`` /
    ``Parameter`` types; on the device the parameters are exactly that, so the
    device tensor class is admitted for the duration of the prediction.
    """
    from dmlprof.predict.tensor import DeviceTensor
    import torch.optim.optimizer as optimizer_module
    import torch.utils._foreach_utils as foreach_utils

    lists = [getattr(m, "_foreach_supported_types", None) for m in (optimizer_module, foreach_utils)]
    added = []
    for types_list in lists:
        if isinstance(types_list, list) and DeviceTensor not in types_list:
            types_list.append(DeviceTensor)
            added.append(types_list)
    try:
        yield
    finally:
        for types_list in added:
            types_list.remove(DeviceTensor)


__all__ = ["predict_scan", "PredictionError", "TARGETS"]
