"""``torch.save``/``torch.load``/``pickle`` of the stand-in's tensors under ``--target xpu``/``mps``: by storage.

XPU's and MPS's tensors have storage, and torch pickles them as it pickles a CPU tensor: ``_rebuild_tensor_v2`` of
their storage, which ``torch.save`` copies to the host and records with the storage's location (read in
torch/serialization.py, 2.4.1 and 2.13, not measured: ``_backend_tag`` writes "xpu:0", ``_mps_tag`` "mps").
``torch.load`` restores each storage by that location or ``map_location``: onto the device ("xpu:0", "mps": the
device's tensors), or kept on the host (``map_location="cpu"``: CPU tensors).

torch reads the device's type as the model's code does ("xpu": :mod:`dmlprof.predict.device_type`), so it took that
path for the stand-in's tensors too and read their storage, which holds no memory ("Attempted to access the data
pointer on an invalid python storage"). While a stand-in tensor is pickled, its storage reads as a host copy of it
(the stand-in's ``copy_``: the values the prediction holds), which torch records with the target's location. A
storage torch.load restores onto the target (or the stand-in) stays on the host, as the stand-in has no memory to
make one in, and the tensor torch rebuilds on it (``torch._utils._rebuild_tensor``, which torch's rebuilds call,
the weights-only unpickler's too) is made on the stand-in from it: one copy per storage, so views of one storage
stay views of one tensor. Tensors pickled by torch-directml's host-copy path are left to it.

A stand-in storage's ``data_ptr()`` answers an address of its own, as a device's storage does (safetensors groups
tensors sharing memory by it before it copies them to the host).
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Callable, Optional

import torch

from dmlprof.directml import no_storage

REBUILD_TENSOR = torch._utils._rebuild_tensor
STORAGE_DATA_PTR = torch.UntypedStorage.data_ptr
#: before the CPU's tagger (10), which would record a host copy as "cpu"; before no_storage's deserializer (19)
_PRIORITY = 9
#: while installed: the target's device type ("xpu"), the stand-in's ("privateuseone"), the state torch pickles
_target_type: Optional[str] = None
_stand_in_type: Optional[str] = None
_users_state: Optional[Callable] = None
#: a host copy's storage being pickled (its ``_cdata``) -> the location torch records for it
_host_copies: dict = {}
#: (a stand-in storage's ``_cdata``, dtype, version) -> its host copy, while torch holds it (one save, one pickle):
#: views of one storage are saved with one storage, as torch saves a device's
_host_copy_of = weakref.WeakValueDictionary()
#: a host storage torch.load restored for the stand-in (its ``_cdata``) -> (the stand-in device, {dtype: its copy})
_bound_for_stand_in: dict = {}
_registered: list = []


def install(target_type: str, stand_in_type: str, users_state: Callable) -> None:
    """``users_state``: stands for ``torch._utils._get_obj_state`` while a stand-in tensor is pickled."""
    global _target_type, _stand_in_type, _users_state
    _target_type, _stand_in_type, _users_state = target_type, stand_in_type, users_state
    torch._utils._rebuild_tensor = _rebuild_tensor
    torch.UntypedStorage.data_ptr = _data_ptr
    if not _registered:  # torch keeps them for the process: they answer only while installed
        torch.serialization.register_package(_PRIORITY, _tags_host_copy, _kept_for_the_stand_in)
        _registered.append(True)


def remove() -> None:
    global _target_type, _stand_in_type, _users_state
    _target_type = _stand_in_type = _users_state = None
    torch._utils._rebuild_tensor = REBUILD_TENSOR
    if "data_ptr" in torch.UntypedStorage.__dict__:
        del torch.UntypedStorage.data_ptr  # torch.StorageBase's again
    _host_copies.clear()
    _host_copy_of.clear()
    _bound_for_stand_in.clear()


def reduce_ex(self, proto):
    """``Tensor.__reduce_ex__``: a stand-in tensor by torch's path for tensors with storage, its storage read as a
    host copy of it; the Python state without the stand-in's alias."""
    if not no_storage.is_device_tensor(self):
        return no_storage.REDUCE(self, proto)
    host = _host_copy(self)
    read = torch.Tensor.untyped_storage
    own = "untyped_storage" in torch.Tensor.__dict__  # else TensorBase's, shadowed for the call

    def untyped_storage(tensor):
        return host if tensor is self else read(tensor)

    torch.Tensor.untyped_storage = untyped_storage
    torch._utils._get_obj_state = _users_state
    try:
        return no_storage.REDUCE(self, proto)
    finally:
        torch._utils._get_obj_state = no_storage.OBJ_STATE
        if own:
            torch.Tensor.untyped_storage = read
        else:
            del torch.Tensor.untyped_storage


def _host_copy(tensor) -> torch.UntypedStorage:
    """The host copy of ``tensor``'s whole storage (its offset, sizes and strides are torch's to pickle), known to
    the tagger by the target's location for as long as it lives."""
    storage = tensor.untyped_storage()
    key = (storage._cdata, tensor.dtype, tensor._version)  # the version: a write since then makes another copy
    host = _host_copy_of.get(key)
    if host is not None:
        return host
    with torch.no_grad():
        host = tensor.as_strided((storage.nbytes() // tensor.element_size(),), (1,), 0).to("cpu").untyped_storage()
    _host_copy_of[key] = host
    index = tensor.device.index or 0
    # torch's taggers: XPU's storage "xpu:0" (_backend_tag), MPS's "mps" whatever its index (_mps_tag)
    _host_copies[host._cdata] = _target_type if _target_type == "mps" else f"{_target_type}:{index}"
    weakref.finalize(host, _host_copies.pop, host._cdata, None)
    return host


def _tags_host_copy(storage) -> Optional[str]:
    storage = getattr(storage, "_untyped_storage", storage)
    if storage.device.type != "cpu":
        return None
    return _host_copies.get(storage._cdata)


def _kept_for_the_stand_in(storage, location: str):
    """A storage torch.load restores onto the target's device (or the stand-in, or an alias of it: ``--from
    cuda``'s "cuda"), kept on the host and marked for :func:`_rebuild_tensor` (None: not one)."""
    if _target_type is None:
        return None
    device_type, _, index = location.partition(":")
    if device_type not in {_target_type, _stand_in_type, *no_storage.aliases()}:
        return None
    _bound_for_stand_in[storage._cdata] = (torch.device(_stand_in_type, int(index) if index else 0), {})
    weakref.finalize(storage, _bound_for_stand_in.pop, storage._cdata, None)
    return storage


def _rebuild_tensor(storage, storage_offset, size, stride):
    """torch's, on the stand-in for a storage restored for it: its whole storage copied there once per dtype."""
    bound = _bound_for_stand_in.get(storage._untyped_storage._cdata)
    if bound is None:
        return REBUILD_TENSOR(storage, storage_offset, size, stride)
    device, copies = bound
    whole = copies.get(storage.dtype)
    if whole is None:
        host = REBUILD_TENSOR(storage, 0, (storage._size(),), (1,))
        whole = copies[storage.dtype] = host.to(device)
    with torch.no_grad():
        return whole.as_strided(size, stride, storage_offset).detach()  # a leaf: torch sets its requires_grad


def _data_ptr(storage) -> int:
    """``UntypedStorage.data_ptr``, answering for a stand-in storage, which holds no memory, as a device's storage
    answers: an address of its own, not 0 (torch raised "Attempted to access the data pointer on an invalid python
    storage"). Its ``_cdata`` is one: safetensors' check for tensors sharing memory groups them by it, as on XPU."""
    if storage.device.type == _stand_in_type and storage.nbytes():
        return storage._cdata
    return STORAGE_DATA_PTR(storage)
