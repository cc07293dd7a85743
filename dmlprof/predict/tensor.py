"""Device tensors without memory: meta storage that reports the predicted device.

The same construction as torch's FakeTensor (``_make_subclass`` with
``dispatch_device`` and ``device_for_backend_keys``), kept minimal because
FakeTensorMode imports torch._dynamo (seconds, hundreds of MB) and costs far
more per call than prediction needs. The tensor carries the PrivateUse1
dispatch keys and answers ``.device`` (in Python and C++) with the predicted
device, so autograd and composite kernels take the device's paths; kernels run
as Meta kernels on its meta storage (:func:`run_meta`).
"""
from __future__ import annotations

import threading

import torch

_META = torch.device("meta")
_CPU = torch.device("cpu")
_PRIM_DEVICE = torch.ops.prim.device.default
_local = threading.local()


def in_kernel() -> bool:
    return getattr(_local, "in_kernel", False)


class DeviceTensor(torch.Tensor):
    """A tensor on the predicted device; its storage is meta (no memory, no values)."""

    predicted_device: torch.device

    @staticmethod
    def __new__(cls, elem: torch.Tensor, device: torch.device):
        assert elem.device.type == "meta", elem.device
        self = torch.Tensor._make_subclass(cls, elem, elem.requires_grad, dispatch_device=True,
                                           device_for_backend_keys=device)
        self.predicted_device = device
        return self

    @property
    def device(self):
        return _META if in_kernel() else self.predicted_device

    # torch functions return plain results; only the dispatcher level is ours.
    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self):
        return f"DeviceTensor(shape={tuple(self.shape)}, dtype={self.dtype}, device={self.predicted_device})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is _PRIM_DEVICE:
            return _META if in_kernel() else args[0].predicted_device
        # Outside a prediction (no mode active): compute on meta all the same.
        return run_meta(func, args, kwargs or {})


def to_device(tensor: torch.Tensor, device: torch.device) -> DeviceTensor:
    """A device tensor with ``tensor``'s shape, strides and dtype (nothing copied)."""
    with torch._C._DisableTorchDispatch():
        meta = torch.empty_strided(tuple(tensor.shape), tuple(tensor.stride()), dtype=tensor.dtype, device="meta")
    return DeviceTensor(meta, device)


def _to_meta(value, replaced: dict):
    """Real (non-device) tensors among the arguments as meta tensors, except CPU scalars."""
    if isinstance(value, torch.Tensor) and not isinstance(value, DeviceTensor):
        if value.device.type == "meta" or (value.device.type == "cpu" and value.dim() == 0):
            return value  # meta kernels accept CPU scalars next to device tensors, as devices do
        with torch._C._DisableTorchDispatch():
            meta = torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
        replaced[id(meta)] = (meta, value)
        return meta
    if isinstance(value, (list, tuple)):
        return type(value)(_to_meta(v, replaced) for v in value)
    return value


def first_device(values):
    for value in values:
        if isinstance(value, DeviceTensor):
            return value.predicted_device
        if isinstance(value, (list, tuple)):
            found = first_device(value)
            if found is not None:
                return found
    return None


def run_meta(func, args, kwargs):
    """Run ``func``'s Meta kernel (Python dispatch off, Meta in the TLS include set); outputs come back as device tensors (or the argument objects they alias).

    An output on the CPU (a copy to the host) is a real CPU tensor of zeros: its
    shape is known, its values are not.
    """
    replaced: dict = {}
    meta_args = _to_meta(args, replaced)
    meta_kwargs = {k: _to_meta(v, replaced) for k, v in kwargs.items()}
    target = kwargs.get("device")
    device = torch.device(target) if target is not None else (first_device(args) or first_device(kwargs.values()))
    if target is not None:
        # Factories pick their kernel from the device argument (BackendSelect), not from the TLS set.
        meta_kwargs["device"] = _META
    previous = getattr(_local, "in_kernel", False)
    _local.in_kernel = True
    try:
        with torch._C._DisableTorchDispatch(), torch._C._PreserveDispatchKeyGuard():
            torch._C._set_meta_in_tls_dispatch_include(True)
            out = func(*meta_args, **meta_kwargs)
    finally:
        _local.in_kernel = previous
    return _wrap(out, device, replaced)


def _wrap(value, device, replaced):
    if isinstance(value, torch.Tensor):
        if isinstance(value, DeviceTensor):
            return value
        original = replaced.get(id(value))
        if original is not None and original[0] is value:
            return original[1]  # in-place or out= on a real tensor: return that tensor
        if value.device.type != "meta":
            return value
        if device is None or device.type == "meta":
            return value
        if device.type == "cpu":
            with torch._C._DisableTorchDispatch():
                return torch.zeros(tuple(value.shape), dtype=value.dtype)
        return DeviceTensor(value, device)
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap(v, device, replaced) for v in value)
    return value
