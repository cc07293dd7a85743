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


_UNCACHEABLE_TAGS = tuple(getattr(torch.Tag, name) for name in ("inplace_view", "dynamic_output_shape",
                                                                   "data_dependent_output") if hasattr(torch.Tag, name))
_cacheable: dict = {}
# (op, argument metadata) -> output metadata, for ops whose outputs are fresh
# tensors: a model repeats the same calls on the same shapes (every layer of a
# transformer), and Meta kernels written in Python cost far more than a lookup.
_shape_cache: dict = {}
_SHAPE_CACHE_MAX = 1 << 16
_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


def _cache_kind(func):
    """``"fresh"`` (returns new tensors), ``"inplace"`` (returns the tensors it wrote: in-place, out=), or None."""
    known = _cacheable.get(func, False)
    if known is False:
        schema = func._schema
        returns = schema.returns
        known = None
        if returns and all(str(ret.type) == "Tensor" for ret in returns) and \
                not any(tag in _UNCACHEABLE_TAGS for tag in func.tags):
            if all(ret.alias_info is None for ret in returns) and not schema.is_mutable:
                known = "fresh"
            elif all(ret.alias_info is not None and ret.alias_info.is_write for ret in returns):
                known = "inplace"
        _cacheable[func] = known
    return known


def _key_part(value):
    if isinstance(value, torch.Tensor):
        device = value.predicted_device if isinstance(value, DeviceTensor) else value.device
        return (tuple(value.shape), value.stride(), value.storage_offset(), value.dtype, device,
                value.is_conj(), value.is_neg())
    if isinstance(value, _SCALARS):
        return (type(value), value)
    if isinstance(value, (list, tuple)):
        return tuple(_key_part(v) for v in value)
    raise TypeError  # not a value the cache can key on


def _flat_tensors(values, found: list) -> list:
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            _flat_tensors(value, found)
    return found


def _cache_key(func, args, kwargs):
    try:
        return (func, _key_part(args), tuple((k, _key_part(v)) for k, v in kwargs.items()))
    except TypeError:
        return None


def run_meta(func, args, kwargs):
    """Run ``func``'s Meta kernel (Python dispatch off, Meta in the TLS include set); outputs come back as device tensors (or the argument objects they alias).

    An output on the CPU (a copy to the host) is a real CPU tensor of zeros: its
    shape is known, its values are not. Calls repeating an earlier call's op and
    argument metadata are answered from a cache instead of the kernel.
    """
    kind = _cache_kind(func)
    key = _cache_key(func, args, kwargs) if kind else None
    if key is not None:
        hit = _shape_cache.get(key)
        if hit is not None:
            if kind == "inplace":  # the outputs are the arguments it wrote, metadata unchanged
                flat = _flat_tensors((args, tuple(kwargs.values())), [])
                outs = [flat[index] for index in hit]
            else:
                device, metas = hit
                with torch._C._DisableTorchDispatch():
                    outs = [DeviceTensor(torch.empty_strided(shape, stride, dtype=dtype, device="meta"), device)
                            if device.type != "cpu" else torch.zeros(shape, dtype=dtype)
                            for shape, stride, dtype in metas]
            return outs[0] if len(outs) == 1 else tuple(outs)
    out = _run_meta(func, args, kwargs)
    if key is not None and len(_shape_cache) < _SHAPE_CACHE_MAX:
        outs = out if isinstance(out, tuple) else (out,)
        if kind == "fresh":
            if all(isinstance(o, DeviceTensor) for o in outs):
                _shape_cache[key] = (outs[0].predicted_device,
                                     tuple((tuple(o.shape), o.stride(), o.dtype) for o in outs))
        elif _cache_key(func, args, kwargs) == key:  # no argument was resized or restrided
            flat = _flat_tensors((args, tuple(kwargs.values())), [])
            indices = [next((i for i, t in enumerate(flat) if t is o), None) for o in outs]
            if None not in indices:
                _shape_cache[key] = indices
    return out


def _run_meta(func, args, kwargs):
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
