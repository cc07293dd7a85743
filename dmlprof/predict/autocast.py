"""``torch.autocast`` on the stand-in, for a target whose device autocasts (MPS, XPU).

torch registers no autocast kernels for a PrivateUse1 device: a backend registers its own on the
``AutocastPrivateUse1`` key (torch-directml registers none, so under ``--target dml`` autocast stays refused, as
on the real device). MPS and XPU have torch's own (``AutocastMPS``, ``AutocastXPU``, in ATen's
autocast_mode.cpp), so for their prediction the stand-in registers kernels that cast as those do: the ops the
running torch registers on the target's autocast key are cast by torch's three policies (lower precision, float32,
promote to the widest), every other op falls through. Which op takes which policy is read from torch's lists
below, since a registered kernel does not say; the running torch's registrations say which ops autocast at all.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

KEY = "AutocastPrivateUse1"

#: autocast_mode.cpp's ``lower_precision_fp`` ops (AT_FORALL_LOWER_PRECISION_FP, and MPS's batch_norm and
#: _mps_convolution), by name without overload
LOWER_PRECISION = frozenset({
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linear",
    "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "_scaled_dot_product_flash_attention",
    "scaled_dot_product_attention", "_mps_convolution", "batch_norm", "cudnn_convolution",
    "cudnn_convolution_transpose",
})
#: its ``promote`` ops: every floating input cast to the widest floating dtype among them
PROMOTE = frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
                     "tensordot", "scatter_add", "cat", "stack", "_cat"})


def policies(target_key: str) -> dict:
    """``{op name: "lower" | "fp32" | "promote"}`` for the ops the running torch autocasts on ``target_key``
    ("AutocastMPS"); a torch without that key (2.4 has no AutocastMPS) gives CUDA's, the lists both share."""
    names = torch._C._dispatch_get_all_op_names()
    try:
        torch._C._dispatch_has_kernel_for_dispatch_key("aten::mm", target_key)
    except RuntimeError:
        target_key = "AutocastCUDA"
    found = {}
    for name in names:
        if name.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(name, target_key):
            base = name[len("aten::"):].split(".", 1)[0]
            found[name] = "lower" if base in LOWER_PRECISION else "promote" if base in PROMOTE else "fp32"
    return found


def _eligible(value, device_type: str) -> bool:
    """What autocast casts: a floating tensor on the device, not float64 (autocast_mode.h's is_eligible)."""
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64 \
        and value.device.type == device_type


def _cast(value, dtype, device_type: str):
    if _eligible(value, device_type) and value.dtype != dtype:
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(item, dtype, device_type) for item in value)
    return value


def _widest(values, device_type: str):
    found = []
    for value in values:
        items = value if isinstance(value, (list, tuple)) else (value,)
        found += [item.dtype for item in items if _eligible(item, device_type)]
    return max(found, key=lambda dtype: torch.finfo(dtype).bits, default=None)


def _kernel(overload, policy: str, device_type: str):
    excluded = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

    def autocast_kernel(*args, **kwargs):
        if policy == "lower":
            dtype = torch.get_autocast_dtype(device_type) if hasattr(torch, "get_autocast_dtype") else \
                torch.get_autocast_gpu_dtype()
        elif policy == "fp32":
            dtype = torch.float32
        else:
            dtype = _widest(tuple(args) + tuple(kwargs.values()), device_type)
        if dtype is not None:
            args = _cast(args, dtype, device_type)
            kwargs = {name: _cast(value, dtype, device_type) for name, value in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(excluded):  # the op itself, below autocast (as ATen's kernels)
            return overload(*args, **kwargs)
    return autocast_kernel


class TargetAutocast:
    """The stand-in's autocast kernels for a target (``target_key``: "AutocastMPS"), while installed."""

    def __init__(self, target_key: str, device_type: str):
        self.target_key = target_key
        self.device_type = device_type
        self._libraries: dict = {}
        self._seen: set = set()
        self._policies: dict = {}

    def install(self) -> None:
        self._policies = policies(self.target_key)
        self.refresh()

    def refresh(self) -> None:
        """Kernels (or a fall-through) for ops defined since the last call."""
        from dmlprof.record.tap import op_overload

        for name in torch._C._dispatch_get_all_op_names():
            if name in self._seen:
                continue
            self._seen.add(name)
            namespace, _, rest = name.partition("::")
            library = self._libraries.get(namespace)
            if library is None:
                library = self._libraries[namespace] = torch.library.Library(namespace, "IMPL")
            policy = self._policies.get(name)
            overload = op_overload(name) if policy else None
            try:
                if overload is None:
                    library.impl(rest, torch.library.fallthrough_kernel, KEY)
                else:
                    library.impl(overload, _kernel(overload, policy, self.device_type), KEY)
            except RuntimeError:
                continue  # an op already given an autocast kernel by its own library

    def remove(self) -> None:
        for library in self._libraries.values():
            library._destroy()
        self._libraries.clear()
        self._seen.clear()


@contextmanager
def target_device_type_autocasts(target_type: str, stand_in_type: str):
    """``torch.autocast("mps")`` under ``--target mps`` autocasts on the stand-in (``torch.autocast`` of the
    target's device type would otherwise enable the target's own autocast, which no tensor of the run is on)."""
    autocast = torch.amp.autocast_mode.autocast
    original = autocast.__init__

    def __init__(self, device_type, *args, **kwargs):
        original(self, stand_in_type if device_type == target_type else device_type, *args, **kwargs)

    autocast.__init__ = __init__
    try:
        yield
    finally:
        autocast.__init__ = original
