"""The stand-in device's tensors: plain ``torch.Tensor`` objects on ``privateuseone`` with no memory behind them.

Every device tensor the prediction makes is made here (:func:`device_tensor`),
so this is where the device refuses the data types DirectML cannot hold and
where each new storage is announced to the value table
(:func:`dmlprof.predict.values.born`). Kept apart from the kernels
(:mod:`dmlprof.predict.standin`) because everything else builds on it: the
argument conversion, the placeholders and the Meta-kernel cache all make or
reshape such tensors, and none of them needs the kernels.
"""
from __future__ import annotations

import torch

from dmlprof.directml.failures import ABORTS
from dmlprof.predict.abort_note import note_abort
from dmlprof.predict.values import born, extent

META = torch.device("meta")
#: the Meta key alone: redispatching there runs the generic kernel every backend shares, on the device tensor itself
META_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)


class _Husk(torch.Tensor):
    """Only ever constructed to be shed: ``.data`` of a wrapper tensor is a plain tensor on its device."""

    @staticmethod
    def __new__(cls, shape, stride, offset, dtype, device):
        return torch.Tensor._make_wrapper_subclass(cls, shape, strides=stride, storage_offset=offset, dtype=dtype,
                                                   device=device)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"a husk tensor was dispatched ({func})")


#: the attribute holding a stand-in tensor's second alias (its Python state, which torch.save must not pickle)
OPAQUE = "_dmlprof_opaque"
#: dtype -> the exception torch-directml's refusal of it is, for the data types the installed stand-in refuses
_refused: dict = {}


def refuse(refusals: dict) -> None:
    """From now on the device refuses these data types (dtype -> a function making the exception); {}: none."""
    _refused.clear()
    _refused.update(refusals)


def device_tensor(shape, stride, offset: int, dtype, device: torch.device) -> torch.Tensor:
    """A plain tensor on ``device`` with this geometry and no memory behind it.

    Every device tensor is made here, so here the device refuses what DirectML
    cannot hold, with torch-directml's words, at the op that would create it
    (a complex tensor ends the real process: said as such).
    """
    refused = _refused.get(dtype)
    if refused is not None:
        error = refused()
        if getattr(getattr(error, "failure", None), "kind", None) == ABORTS:
            note_abort("", str(error))  # the op that makes it is not known here (recorded, the recorder names it)
        raise error
    husk = _Husk(tuple(shape), tuple(stride), offset, dtype, device)
    with torch._C._DisableTorchDispatch():
        tensor = husk.data
    born(tensor, (offset + extent(tensor)) * tensor.element_size())
    # torch-directml's tensors have no storage (an OpaqueTensorImpl), so the autograd engine never adds a
    # gradient into one in place: it does so only for a tensor that solely owns its storage. A second tensor
    # on the same storage, held by this one (kept while C++ holds it: PyObject preservation), keeps that
    # ownership from ever being sole, and the engine adds out of place (add, not add_), as on the device.
    # (Not a Python storage object: on newer torch one would keep its storage alive for ever.)
    setattr(tensor, OPAQUE, husk_alias(tensor))
    return tensor


def husk_alias(tensor: torch.Tensor) -> torch.Tensor:
    with torch._C._DisableTorchDispatch():
        return torch.Tensor._make_subclass(torch.Tensor, tensor)


def like(meta: torch.Tensor, device: torch.device) -> torch.Tensor:
    return with_lazy_bits(device_tensor(meta.shape, meta.stride(), meta.storage_offset(), meta.dtype, device), meta)


def with_lazy_bits(tensor: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``source``'s lazy conjugate and negative bits on ``tensor``: whether a later op materialises
    them (``resolve_conj``'s clone) depends on them."""
    if source.is_conj():
        torch._C._set_conj(tensor, True)
    if source.is_neg():
        torch._C._set_neg(tensor, True)
    return tensor


def strided(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A tensor on ``device`` with ``tensor``'s shape, strides and storage offset (zeros where it has memory)."""
    offset = tensor.storage_offset()
    base = torch.zeros(offset + extent(tensor), dtype=tensor.dtype, device=device)
    return with_lazy_bits(base.as_strided(tuple(tensor.shape), tuple(tensor.stride()), offset), tensor)


def meta_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``tensor``'s geometry (its storage offset too)."""
    return strided(tensor, META)


def set_geometry(tensor: torch.Tensor, shape, stride, offset: int) -> None:
    """Give a device tensor a new geometry in place (``resize_``, ``out=`` kernels that resize)."""
    husk = device_tensor(shape, stride, 0, tensor.dtype, tensor.device)
    torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
        META_KEYS, tensor, husk.untyped_storage(), offset, list(shape), list(stride))
