"""The model contract's training step: a model file's model, batch, loss and optimizer, built on a
backend's device and run one step at a time (docs/model_contract.md).

Everything that reads the contract file lives here, so its rules (the names it must define, what
``make_batch`` returns, ``BATCH_SIZE``) have one owner; the contract run, the sweep's child and
``--replace`` all build their step through :meth:`TrainingStep.from_file`.
"""
from __future__ import annotations

import itertools
import operator
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import torch

from dmlprof.backends import Backend
from dmlprof.errors import ModelFileError
from dmlprof.model_file import import_model_module
from dmlprof.record.recorder import Recorder

DEFAULT_BATCH_SIZE = 16


def default_loss(output, target):
    """Cross-entropy for integer targets, mean squared error otherwise."""
    if isinstance(output, (tuple, list)):
        output = output[0]
    if not target.is_floating_point() and not target.is_complex():
        return torch.nn.functional.cross_entropy(output, target)
    return torch.nn.functional.mse_loss(output, target)


def default_optimizer(params):
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)



def _to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=False)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def _check_batch(batch, path: Path):
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise ModelFileError(f"{path.name}: make_batch must return (inputs, target)")
    inputs, target = batch
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    for where, tensor in [("inputs", t) for t in inputs] + [("target", target)]:
        if not isinstance(tensor, torch.Tensor):
            raise ModelFileError(f"{path.name}: make_batch {where} must be tensors, got {type(tensor).__name__}")
        if tensor.device.type != "cpu":
            raise ModelFileError(
                f"{path.name}: make_batch returned {where} on {tensor.device}; "
                "the contract wants CPU tensors (dmlprof moves them to the device)"
            )
    return tuple(inputs), target


def _check_contract_names(module, path: Path) -> None:
    """The contract's functions are functions (``make_batch = 3`` is the file's mistake, not a crash)."""
    for name in ("build_model", "make_batch", "loss_fn", "make_optimizer"):
        value = getattr(module, name, None)
        if value is not None and not callable(value):
            raise ModelFileError(f"{path.name}: {name} must be a function, got {type(value).__name__}")


def _declared_batch_size(module, path: Path) -> int:
    """The file's ``BATCH_SIZE`` (default 16): a whole number of at least 1, or a contract error."""
    value = getattr(module, "BATCH_SIZE", DEFAULT_BATCH_SIZE)
    try:
        size = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        size = None
    if size is None or size < 1:
        shown = repr(value)
        raise ModelFileError(f"{path.name}: BATCH_SIZE must be a whole number of at least 1, got "
                             f"{shown if len(shown) <= 40 else shown[:37] + '...'}")
    return int(size)


class TrainingStep:
    """One training step of a contract file, ready to run on a backend's device."""

    def __init__(self, model, inputs, target, loss_fn, optimizer, device, batch_size: int, loss_name: str = "default"):
        self.model, self.inputs, self.target = model, inputs, target
        self.loss_fn, self.optimizer, self.device = loss_fn, optimizer, device
        self.batch_size, self.loss_name = batch_size, loss_name
        # A context factory around forward + loss (the sweep's --amp sets torch.autocast).
        self.autocast = nullcontext

    @classmethod
    def from_file(cls, path: Path, backend: Backend, batch_size: Optional[int] = None, call=None) -> "TrainingStep":
        """Import the contract file, build its model, batch and optimizer on the backend's device.

        ``call(label, fn, *args)`` runs each piece of user code (the runner
        passes one that turns exceptions into one-line errors).
        """
        call = call or (lambda label, fn, *args: fn(*args))
        module = import_model_module(path)
        _check_contract_names(module, path)
        batch_size = batch_size or _declared_batch_size(module, path)
        model = call("build_model()", module.build_model)
        if not isinstance(model, torch.nn.Module):
            raise ModelFileError(f"{path.name}: build_model() must return an nn.Module, got {type(model).__name__}")
        inputs, target = _check_batch(call("make_batch()", module.make_batch, batch_size), path)
        device = backend.device()
        if backend.predicted and any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers())):
            # A model built on the meta device has no values to copy; a prediction needs none.
            model = call("moving the model to the device", lambda: model.to_empty(device=device))
        else:
            model = call("moving the model to the device", model.to, device)
        model.train()
        loss_fn = getattr(module, "loss_fn", None) or default_loss
        make_optimizer = getattr(module, "make_optimizer", None) or default_optimizer
        optimizer = call("make_optimizer()", make_optimizer, model.parameters())
        if not (callable(getattr(optimizer, "step", None)) and callable(getattr(optimizer, "zero_grad", None))):
            raise ModelFileError(f"{path.name}: make_optimizer() must return an optimizer (with step() and "
                                 f"zero_grad()), got {type(optimizer).__name__}")
        return cls(model, inputs, target, loss_fn, optimizer, device, batch_size,
                   "loss_fn" if hasattr(module, "loss_fn") else "default")

    def run(self, recorder: Optional[Recorder] = None):
        """Batch to device, forward, loss, backward, optimizer step, zero_grad; returns the loss.

        With a recorder, each part is labelled with its phase.
        """
        def phase(name):
            if recorder is not None:
                recorder.phase = name

        phase("other")
        inputs = _to_device(self.inputs, self.device)
        target = _to_device(self.target, self.device)
        phase("forward")
        with self.autocast():
            output = self.model(*inputs)
            loss = self.loss_fn(output, target)
        phase("backward")
        loss.backward()
        phase("optimizer")
        self.optimizer.step()
        phase("other")
        self.optimizer.zero_grad(set_to_none=True)
        return loss
