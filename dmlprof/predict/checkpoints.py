"""``torch.save``, ``torch.load``, ``copy.deepcopy`` and storage reads of the stand-in's tensors: as torch-directml's
(under ``--target xpu``/``mps``, pickled by storage as theirs are: :mod:`dmlprof.predict.target_checkpoints`).

The mechanism is :mod:`dmlprof.directml.no_storage`'s, which the emulated DirectML device's runs install too; this
module adds what the stand-in needs on top: its tensors' second alias left out of what is pickled and copied.

torch-directml's tensors have no storage (an ``OpaqueTensorImpl``), and torch
pickles such a ``PrivateUse1`` tensor by a host copy of it and the device it is
rebuilt on (``torch._utils._rebuild_device_tensor_from_cpu_tensor``; from a
numpy array on torch 2.4). That file loads as ordinary tensors with
``map_location="cpu"`` and onto the device without one; not with ``weights_only=True``, as torch-directml's does
not (on torch 2.5+ refused by :mod:`dmlprof.directml.no_storage` in torch 2.4.1's words).

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

import copy
from typing import Optional

import torch

from dmlprof.directml import no_storage
from dmlprof.predict import target_checkpoints
from dmlprof.predict.husks import OPAQUE, husk_alias


def install(device_type: str, storage_less: bool = False, keeps_views: bool = False,
            target_type: Optional[str] = None) -> None:
    """``storage_less``: the stand-in is torch-directml's, whose tensors have no storage to read (reads of it from
    the model's code, or torch's on its behalf, fail as they fail there, and ``torch._C._has_storage`` answers False
    to them); dmlprof's own code reads the stand-in's. ``keeps_views``: ``copy.deepcopy`` copies storages, as torch
    does for a device with storage (XPU's), not one ``clone()`` per tensor (MPS's, torch-directml's).
    ``target_type``: the device with storage the stand-in predicts ("xpu", "mps"; None: torch-directml's), whose
    tensors ``torch.save`` pickles by their storage (:mod:`dmlprof.predict.target_checkpoints`)."""
    on_target = target_type is not None and not storage_less
    no_storage.install(device_type, refuse_reads=storage_less,
                       reduce_ex=target_checkpoints.reduce_ex if on_target else _reduce_ex,
                       deepcopy=_deepcopy_keeping_views if keeps_views else _deepcopy)
    if on_target:
        target_checkpoints.install(target_type, device_type, _users_state)


def remove() -> None:
    target_checkpoints.remove()
    no_storage.remove()


def _reduce_ex(self, proto):
    if not no_storage.is_device_tensor(self):
        return no_storage.REDUCE(self, proto)
    no_storage.refuse_requiring_grad(self)
    with no_storage.seen_without_storage(state=_users_state):
        return no_storage.REDUCE(self, proto)


def _deepcopy(self, memo):
    """``copy.deepcopy`` of a stand-in tensor (BYOL's target encoder, a best-weights ``state_dict`` copy) as torch
    copies torch-directml's storage-less one, by ``clone()``: torch read the stand-in's storage, which holds no
    memory (a segfault, re-probe 19 case 5). The copy keeps the user's Python state, not the source's alias: the
    clone has its own."""
    if not no_storage.is_device_tensor(self) or id(self) in memo:
        return no_storage.DEEPCOPY(self, memo)
    alias = self.__dict__.pop(OPAQUE, None)
    try:
        with no_storage.seen_without_storage():
            copied = no_storage.DEEPCOPY(self, memo)
    finally:
        if alias is not None:
            setattr(self, OPAQUE, alias)
    if alias is not None and OPAQUE not in copied.__dict__:
        setattr(copied, OPAQUE, husk_alias(copied))
    return copied


#: the memo's entry of one deep copy's storage copies: (storage, dtype) -> a copy of the whole storage
_STORAGE_COPIES = "__dmlprof_storage_copies__"


def _deepcopy_keeping_views(self, memo):
    """``copy.deepcopy`` of a stand-in tensor as torch copies a device tensor with storage (XPU's): its whole storage,
    once per deep copy, and the tensor rebuilt on the copy at its offset, sizes and strides, so a view and its base
    copied together stay a view and its base (re-probe 21, 28: the clone split them, where XPU keeps them). torch's
    own path copies the storage's memory, which the stand-in's lacks; what it copies otherwise (a subclass, the
    conjugate or negative bit, a non-leaf it refuses) takes the clone's path."""
    if (not no_storage.is_device_tensor(self) or id(self) in memo or type(self) is not torch.Tensor
            or not self.is_leaf or self.layout != torch.strided or self.is_conj() or self.is_neg()):
        return _deepcopy(self, memo)
    storage = self.untyped_storage()
    copies = memo.setdefault(_STORAGE_COPIES, {})
    with torch.no_grad():
        whole = copies.get((storage._cdata, self.dtype))
        if whole is None:
            elements = storage.nbytes() // self.element_size()
            whole = copies[(storage._cdata, self.dtype)] = self.as_strided((elements,), (1,), 0).clone()
        copied = whole.as_strided(self.size(), self.stride(), self.storage_offset()).detach()  # a leaf, not a view
    copied.requires_grad = self.requires_grad
    if self.grad is not None:
        copied.grad = copy.deepcopy(self.grad, memo)
    alias = self.__dict__.get(OPAQUE)
    copied.__dict__ = copy.deepcopy({name: value for name, value in self.__dict__.items() if name != OPAQUE}, memo)
    if alias is not None:
        setattr(copied, OPAQUE, husk_alias(copied))
    memo[id(self)] = copied
    return copied


def _users_state(obj):
    """The Python state torch pickles with a tensor, without the stand-in's alias."""
    state = no_storage.OBJ_STATE(obj)
    attributes = state[0] if isinstance(state, tuple) else state
    if not isinstance(attributes, dict) or OPAQUE not in attributes:
        return state
    attributes = {name: value for name, value in attributes.items() if name != OPAQUE}
    return (attributes,) + tuple(state[1:]) if isinstance(state, tuple) else attributes
