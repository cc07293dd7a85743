"""``torch.save``, ``torch.load``, ``copy.deepcopy`` and storage reads of the stand-in's tensors: as torch-directml's.

torch-directml's tensors have no storage (an ``OpaqueTensorImpl``), and torch
pickles such a ``PrivateUse1`` tensor by a host copy of it and the device it is
rebuilt on (``torch._utils._rebuild_device_tensor_from_cpu_tensor``; from a
numpy array on torch 2.4). That file loads as ordinary tensors with
``map_location="cpu"`` and onto the device without one; written on torch 2.4
(numpy) it does not load with ``weights_only=True``, as torch-directml's does not.

The stand-in's tensors have a storage that holds no memory, so torch took its
path for storage-backed tensors and failed reading the storage's data pointer
("Attempted to access the data pointer on an invalid python storage"); and
their second alias (:data:`dmlprof.predict.husks.OPAQUE`) is Python state that
torch would pickle into the user's file. While a stand-in tensor is pickled,
``torch._C._has_storage`` answers False for it, and the state torch reads
(``torch._utils._get_obj_state``) leaves the alias out. Both are looked up by
torch at the call, and restored as soon as that tensor is reduced.

The host copy is the stand-in's own read back (its ``copy_`` kernel): the values
the prediction holds, else 0, a made-up value the prediction reports as such.

``torch.load(..., map_location=<the device>)`` moves every storage it reads
there (the host copy's too, where torch pickles it as a tensor: 2.13, not 2.4's
numpy array) and then reads its data pointer: the stand-in has no memory to
make a storage in (torch segfaulted), so a storage bound for it stays on the host. A tensor pickled as above is then
rebuilt on the device from it; a checkpoint of storage-backed tensors (CPU,
CUDA) loads onto the host instead of the device.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Optional

import torch

from dmlprof.predict.husks import OPAQUE, husk_alias
from dmlprof.runner.user_code import is_dmlprof_code

_REDUCE = torch.Tensor.__reduce_ex__
_DEEPCOPY = torch.Tensor.__deepcopy__
#: what reads a tensor's storage from Python, each as torch has it (torch.Tensor's or TensorBase's)
_STORAGE_READS = {name: getattr(torch.Tensor, name) for name in ("untyped_storage", "storage", "_typed_storage",
                                                               "data_ptr")}
_TENSORS_OWN = {name for name in _STORAGE_READS if name in torch.Tensor.__dict__}
_HAS_STORAGE = torch._C._has_storage
_OBJ_STATE = torch._utils._get_obj_state
#: the stand-in device's type while one is installed
_device_type: Optional[str] = None
#: other device types a run answers with the stand-in's device (``--from cuda``: ``map_location="cuda"``)
_aliases: set = set()
#: torch.serialization's place for a device's deserializer: after the CPU's (10), before CUDA's (20)
_LOAD_PRIORITY = 19
_registered: list = []


def install(device_type: str, storage_less: bool = False) -> None:
    """``storage_less``: the device is torch-directml's, whose tensors have no storage to read (reads of it from
    the user's code, or torch's on its behalf, fail as they fail there, and ``torch._C._has_storage`` answers False
    to them); dmlprof's own code reads the device's storage. The prediction's stand-in installs it for
    ``--target dml``, and so does the emulated DirectML device (its tensors have host storage) for its runs."""
    global _device_type
    _device_type = device_type
    torch.Tensor.__reduce_ex__ = _reduce_ex
    torch.Tensor.__deepcopy__ = _deepcopy
    if storage_less:
        for name, read in _STORAGE_READS.items():
            setattr(torch.Tensor, name, _refused_storage_read(read, name))
        torch._C._has_storage = _has_storage_as_on_directml
    if not _registered:  # torch keeps a registered deserializer for the process: it answers only while installed
        torch.serialization.register_package(_LOAD_PRIORITY, _tags_nothing, _kept_on_the_host)
        _registered.append(True)


def remove() -> None:
    global _device_type
    _device_type = None
    torch.Tensor.__reduce_ex__ = _REDUCE
    torch.Tensor.__deepcopy__ = _DEEPCOPY
    torch._C._has_storage = _HAS_STORAGE
    for name, read in _STORAGE_READS.items():
        if name in _TENSORS_OWN:
            setattr(torch.Tensor, name, read)
        elif name in torch.Tensor.__dict__:  # TensorBase's, shadowed while installed
            delattr(torch.Tensor, name)


@contextmanager
def installed(device_type: str, storage_less: bool = False):
    """:func:`install` for the length of the ``with`` block."""
    install(device_type, storage_less=storage_less)
    try:
        yield
    finally:
        remove()


@contextmanager
def also_named(device_type: str):
    """While the run answers ``device_type``'s requests with the installed device (``--from cuda``), a storage
    ``torch.load`` would move to ``device_type`` (``map_location="cuda"``) is one bound for that device: it too
    stays on the host, and the tensor pickled by its host copy is rebuilt on the device by ``.to(device)``, not by
    ``set_`` on a device storage (re-probe 20, case 16)."""
    _aliases.add(device_type)
    try:
        yield
    finally:
        _aliases.discard(device_type)


def _is_standin(tensor) -> bool:
    return _device_type is not None and isinstance(tensor, torch.Tensor) and tensor.device.type == _device_type


def _reduce_ex(self, proto):
    if not _is_standin(self):
        return _REDUCE(self, proto)
    installed = torch._C._has_storage  # torch's, or torch-directml's answer (storage_less)
    torch._C._has_storage, torch._utils._get_obj_state = _storage_less, _users_state
    try:
        return _REDUCE(self, proto)
    finally:
        torch._C._has_storage, torch._utils._get_obj_state = installed, _OBJ_STATE


def _deepcopy(self, memo):
    """``copy.deepcopy`` of a stand-in tensor (BYOL's target encoder, a best-weights ``state_dict`` copy) as torch
    copies torch-directml's storage-less one, by ``clone()``: torch read the stand-in's storage, which holds no
    memory (a segfault, re-probe 19 case 5). The copy keeps the user's Python state, not the source's alias: the
    clone has its own."""
    if not _is_standin(self) or id(self) in memo:
        return _DEEPCOPY(self, memo)
    alias = self.__dict__.pop(OPAQUE, None)
    installed = torch._C._has_storage
    torch._C._has_storage = _storage_less
    try:
        copied = _DEEPCOPY(self, memo)
    finally:
        torch._C._has_storage = installed
        if alias is not None:
            setattr(self, OPAQUE, alias)
    if alias is not None and OPAQUE not in copied.__dict__:
        setattr(copied, OPAQUE, husk_alias(copied))
    return copied


def _refused_storage_read(read, name: str):
    """``read`` for every tensor but the stand-in's, read from outside dmlprof: there it raises torch-directml's
    error (measured on realdml: a jagged nested tensor's ``values.untyped_storage()``, HF's tied-weight
    ``data_ptr()`` comparison; re-probe 19 cases 13 and 34)."""
    def reading(self, *args, **kwargs):
        if _is_standin(self) and not is_dmlprof_code(sys._getframe(1)):  # the read's caller
            if name == "data_ptr":
                raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")
            raise NotImplementedError("Cannot access storage of OpaqueTensorImpl")
        return read(self, *args, **kwargs)

    reading.__name__ = reading.__qualname__ = name
    reading.__doc__ = read.__doc__
    return reading


def _has_storage_as_on_directml(tensor) -> bool:
    """``torch._C._has_storage`` as torch-directml answers it: False for its tensors, asked from outside dmlprof
    (measured on realdml: a library's guard ``_has_storage(h) and h.data_ptr()`` skips the read; re-probe 20,
    case 5); dmlprof's own code is told what the device holds."""
    if _is_standin(tensor) and not is_dmlprof_code(sys._getframe(1)):
        return False
    return _HAS_STORAGE(tensor)


def _storage_less(tensor) -> bool:
    return False if _is_standin(tensor) else _HAS_STORAGE(tensor)


def _users_state(obj):
    """The Python state torch pickles with a tensor, without the stand-in's alias."""
    state = _OBJ_STATE(obj)
    attributes = state[0] if isinstance(state, tuple) else state
    if not isinstance(attributes, dict) or OPAQUE not in attributes:
        return state
    attributes = {name: value for name, value in attributes.items() if name != OPAQUE}
    return (attributes,) + tuple(state[1:]) if isinstance(state, tuple) else attributes


def _tags_nothing(storage) -> None:
    return None  # what a storage is saved as stays torch's


def _kept_on_the_host(storage, location: str):
    """A storage torch.load would move onto the stand-in device, left on the host (None: not one)."""
    if _device_type is None or location.split(":", 1)[0] not in {_device_type, *_aliases}:
        return None
    return storage
