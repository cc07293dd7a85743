"""The predicting dispatch mode: classify each call against the op table, without a device.

Tensors on the predicted device are device tensors (meta storage, see tensor.py) that report
``privateuseone:0``, so everything above the backend (autograd, composite
kernels, Python device checks) runs exactly as on torch-directml. This mode sits
where the live recorder sits (below autograd) and sees the same calls. Per
call it asks the table what the PrivateUse1 kernel is:

* ``native``: the DirectML kernel runs it; computed on meta.
* ``fallback``: DirectML's boxed CPU fallback runs it; recorded as such.
* ``composite_explicit``: torch's generic kernel runs below this mode and calls
  other ops; it is run here, with this mode re-entered, so the ops it really
  reaches are classified too and any that fall back are named on this call's
  row (``_foreach_lerp_.Scalar`` -> ``lerp.Scalar_out`` once per tensor), as
  the live recorder names them from the fallback warnings.
* ``composite_implicit``: on the device it decomposes before reaching the
  recorder, so here it is decomposed and its pieces are recorded in its place.

Calls on CPU tensors run for real (an optimizer's step counters, ``.item()``
on them). A call the meta kernels cannot answer (no meta kernel; output shape
or value decided by data) runs on the CPU on placeholder tensors (zeros) and is
listed in ``placeholder_ops``: its op name is certain, shapes and values after
it may not be.
"""
from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from typing import Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dmlprof.record.attribution import ModuleTracker, user_source_line
from dmlprof.record.frame import op_name
from dmlprof.errors import DmlprofError
from dmlprof.predict.tensor import DeviceTensor, run_meta, to_device
from dmlprof.record.recorder import _outputs_tuple, _tensor_meta

# Queries the dispatcher makes about a tensor (prim::device...) and profiler
# ranges: not ops a backend runs.
_PASS_NAMESPACES = frozenset({"prim", "profiler"})
_PRIM_DEVICE = torch.ops.prim.device.default
_EXPLICIT_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd")
_IMPLICIT_KEY = "CompositeImplicitAutograd"
_thread_id = threading.get_ident


def fallback_warning(op: str) -> str:
    """torch-directml's fallback warning for ``op``, word for word (the live recorder's evidence)."""
    return (f"The operator '{op}' is not currently supported on the DML backend and will fall back to run "
            "on the CPU. This may have performance implications.")


def _has_kernel(name: str, key: str) -> bool:
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))
    except Exception:
        return False


class PredictMode(TorchDispatchMode):
    """Records one raw row per call (the live recorder's tuple layout) with table-decided fallbacks."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch >= 2.9 wraps __torch_dispatch__ to keep torch.compile out of it,
        # importing torch._dynamo (seconds) on the first call; prediction never compiles.
        return False

    def __init__(self, table, device: torch.device):
        super().__init__()
        self.table = table
        self.device = device
        self.device_type = device.type
        self.rows: list = []
        self.warnings: list = []  # synthetic fallback warnings; rows index into it
        self.step = 0
        self.phase = "other"
        self.optimizer_name = ""
        self.recording = False
        self.modules = ModuleTracker()
        self.unknown_ops: Counter = Counter()
        self.placeholder_ops: Counter = Counter()
        self.drift_ops: Counter = Counter()  # composite in the table's torch, not in this one
        self._depth = 0
        # Composites being followed: a kernel that calls its own op again (detach
        # does) reaches the device's kernel path the second time, not the composite.
        self._following: list = []
        self._kinds: dict = {}
        self._registered = frozenset(table.registrations.get("PrivateUse1", ()))

    # -- tensors ------------------------------------------------------------------
    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """A device tensor on the predicted device with ``tensor``'s metadata (no data, no copy recorded)."""
        return to_device(tensor, self.device)

    def _on_device(self, args, kwargs) -> bool:
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == self.device_type:
            return True
        return _any_device_tensor(args, self.device_type) or _any_device_tensor(kwargs.values(), self.device_type)

    # -- classification ----------------------------------------------------------
    def kind_of(self, func) -> str:
        """What the PrivateUse1 kernel is for ``func``, adjusted to what the running torch can run."""
        cached = self._kinds.get(func)
        if cached is not None:
            return cached
        name = op_name(func)
        kind = self.table.kind(name)
        explicit = next((key for key in _EXPLICIT_KEYS if _has_kernel(name, key)), None)
        implicit = _has_kernel(name, _IMPLICIT_KEY)
        if kind is None and name in self._registered:
            kind = "native"  # registered by the backend outside the table's namespace (torchvision::roi_align)
        if kind is None:
            # Unknown to the table (new in this torch, or not aten). torch-directml
            # was built against the table's torch, so it has no kernel for it: the
            # dispatcher would pick this torch's composite, else the fallback.
            kind = "composite_explicit" if explicit else "composite_implicit" if implicit else "fallback"
            kind = "unknown:" + kind
        resolved = kind.split(":")[-1]
        if resolved.startswith("composite") and not (explicit or implicit):
            # The table's torch had a composite here, this torch has none: torch-directml
            # registered no kernel of its own (else the table would say native), so the
            # dispatcher would reach the fallback.
            self.drift_ops[name] += 1
            resolved = "fallback"
        elif resolved == "composite_explicit" and not explicit:
            resolved = "composite_implicit"
        elif resolved == "composite_implicit" and not implicit:
            resolved = "composite_explicit"
        result = ("unknown:" if kind.startswith("unknown:") else "") + resolved
        if resolved == "composite_explicit":
            result += "|" + explicit
        self._kinds[func] = result
        return result

    # -- dispatch ------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _PRIM_DEVICE:  # C++ asking a device tensor its device: the hottest call by far
            return args[0].device
        kwargs = kwargs or {}
        if func.namespace in _PASS_NAMESPACES:
            return func(*args, **kwargs)  # answered by the tensors themselves
        device_op = self._on_device(args, kwargs)
        kind = self.kind_of(func) if device_op else "cpu"
        if kind.startswith("unknown:"):
            self.unknown_ops[op_name(func)] += 1
            kind = kind[len("unknown:"):]
        if kind == "composite_implicit":
            # Decomposed above the recorder on the device: the pieces are the calls.
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
            kind = "native"
        if self._depth or not self.recording:
            return self._run(func, args, kwargs, kind, device_op)
        inputs = _tensor_meta(args)
        if kwargs:
            inputs += _tensor_meta(kwargs.values())
        warned_before = len(self.warnings)
        try:
            out = self._run(func, args, kwargs, kind, device_op)
        except PredictedFailure:
            self._add_row(func, inputs, (), warned_before)  # the call that fails is the last row
            raise
        self._add_row(func, inputs, _tensor_meta(_outputs_tuple(out)), warned_before)
        return out

    def _add_row(self, func, inputs, outputs, warned_before: int) -> None:
        warned_after = len(self.warnings)
        phase = self.phase
        module, source = self.modules.owner(phase, self.optimizer_name)
        if phase != "optimizer" and (warned_after != warned_before or any(m[0] != self.device_type for m in inputs)):
            source = _model_source_line() or source
        self.rows.append((self.step, phase, func, inputs, outputs, 0, 0, warned_before, warned_after,
                          module, source, _thread_id()))

    def _run(self, func, args, kwargs, kind: str, device_op: bool):
        if kind.startswith("composite_explicit") and func not in self._following:
            key = getattr(torch._C.DispatchKey, kind.split("|", 1)[1])
            self._depth += 1
            self._following.append(func)
            try:
                with self:
                    return func._op_dk(key, *args, **kwargs)
            finally:
                self._following.pop()
                self._depth -= 1
        if kind.startswith("composite_explicit"):
            kind = "native"
        if kind == "fallback":
            name = op_name(func)
            self.warnings.append(fallback_warning(name))
            if not _cpu_can_run(name):
                raise PredictedFailure(name)
            if _elements(args) + _elements(kwargs.values()) <= CPU_SHAPES_MAX_ELEMENTS:
                # The fallback runs the CPU kernel, whose outputs can differ in shape from the
                # meta kernel's (the CPU's _embedding_bag returns an empty offset2bag for mode
                # "sum", and the backward then rebuilds it on the device). Small enough: ask the CPU.
                out = self._placeholder(func, args, kwargs, count=False)
                if out is not _FAILED:
                    return out
        return self._execute(func, args, kwargs, device_op=device_op)

    def _execute(self, func, args, kwargs, *, device_op: bool):
        """Compute the outputs: meta kernels for device tensors, the CPU for real ones."""
        if not device_op and not (_any_device_tensor(args, None) or _any_device_tensor(kwargs.values(), None)):
            return func(*args, **kwargs)  # real CPU tensors: run for real
        stand_in = _STAND_INS.get(op_name(func))
        try:
            if stand_in is not None:
                return stand_in(*args, **kwargs)
            return run_meta(func, args, kwargs)
        except Exception as exc:  # no meta kernel, or the data decides the output
            out = self._placeholder(func, args, kwargs)
            if out is _FAILED:
                raise exc
            return out

    def _placeholder(self, func, args, kwargs, count: bool = True):
        """Run ``func`` on the CPU on zeros in place of the device tensors; device tensors out with its results' shapes."""
        originals: dict = {}
        device_of_outputs: Optional[torch.device] = None

        def to_cpu(value):
            nonlocal device_of_outputs
            if isinstance(value, DeviceTensor):
                device_of_outputs = device_of_outputs or value.predicted_device
                with torch._C._DisableTorchDispatch():
                    real = torch.zeros(tuple(value.shape), dtype=value.dtype)
                originals[id(real)] = (real, value)
                return real
            if isinstance(value, (list, tuple)):
                return type(value)(to_cpu(v) for v in value)
            return value

        cpu_args = to_cpu(args)
        cpu_kwargs = {k: to_cpu(v) for k, v in kwargs.items()}
        target = kwargs.get("device")
        if target is not None:
            device_of_outputs = torch.device(target)
            cpu_kwargs["device"] = torch.device("cpu")
        try:
            out = func(*cpu_args, **cpu_kwargs)
        except Exception:
            return _FAILED
        for real, fake in originals.values():
            if tuple(real.shape) != tuple(fake.shape):
                return _FAILED  # the CPU kernel resized an argument in place; leave it to the meta kernel
        if count:
            self.placeholder_ops[op_name(func)] += 1
        device_of_outputs = device_of_outputs or self.device

        def to_fake(value):
            if isinstance(value, torch.Tensor):
                known = originals.get(id(value))
                if known is not None and known[0] is value:
                    return known[1]  # in-place and out= ops return their argument
                if device_of_outputs.type == "cpu":
                    return value
                return to_device(value, device_of_outputs)
            if isinstance(value, (list, tuple)):
                return type(value)(to_fake(v) for v in value)
            return value

        return to_fake(out)


_FAILED = object()
# Fallback calls whose tensors hold at most this many elements in all run on the
# CPU (on zeros) to learn the CPU kernel's output shapes; larger ones use meta.
CPU_SHAPES_MAX_ELEMENTS = 1 << 21


def _elements(values) -> int:
    total = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            total += value.numel()
        elif isinstance(value, (list, tuple)):
            total += _elements(value)
    return total


class PredictedFailure(DmlprofError):
    """The step would fail on the device: an op falls back to a CPU that has no kernel for it."""

    def __init__(self, op: str):
        super().__init__(
            f"would raise NotImplementedError on DirectML: {op} has no DirectML kernel, and the CPU, "
            "where the fallback sends it, has none either",
            remedy="avoid the module or function that calls it on this device (see the fallback hotspots)",
        )
        self.op = op


def _cpu_can_run(name: str) -> bool:
    """Whether the CPU fallback can run ``name``: a CPU kernel, or a composite that fills the CPU's slot."""
    return any(_has_kernel(name, key) for key in ("CPU",) + _EXPLICIT_KEYS + (_IMPLICIT_KEY,))


def _model_source_line() -> str:
    """The innermost user frame, unless it is the program running dmlprof (its console script)."""
    line = user_source_line(3)
    program = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if line and program and os.path.abspath(line.rpartition(":")[0]) == os.path.abspath(program):
        return ""
    return line


def _convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return torch.ops.aten.convolution.default(input, weight, bias, stride, padding, dilation, transposed,
                                              output_padding, groups)


def _convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed,
                                       output_padding, groups, output_mask):
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    return torch.ops.aten.convolution_backward.default(grad_output, input, weight, [channels], stride, padding,
                                                       dilation, transposed, output_padding, groups, output_mask)


# Ops that only a device backend implements (their CPU and meta entries throw):
# their outputs' shapes come from the generic op they stand for.
_STAND_INS = {
    "aten::convolution_overrideable": _convolution_overrideable,
    "aten::convolution_backward_overrideable": _convolution_backward_overrideable,
}


def _any_device_tensor(values, device_type: Optional[str]) -> bool:
    for value in values:
        if isinstance(value, DeviceTensor):
            if device_type is None or value.device.type == device_type:
                return True
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, DeviceTensor) and (device_type is None or item.device.type == device_type):
                    return True
    return False
