"""A device's tensors shown to the user's code as torch-directml's: without storage (an ``OpaqueTensorImpl``).

Two devices dmlprof runs on stand in for torch-directml's and have a storage its tensors lack: the prediction's
stand-in (a storage that holds no memory: :mod:`dmlprof.predict.checkpoints` adds what it needs on top) and the
emulated DirectML device (host storage, :mod:`dmlprof.backends.emulated`). Measured on realdml (torch 2.4.1 +
torch-directml 0.2.5), and so while installed, for the device's tensors asked from outside dmlprof (the user's code,
or torch's Python on its behalf):

- ``data_ptr()`` and ``to_dlpack``/``__dlpack__`` raise "Cannot access data pointer of Tensor that doesn't have
  storage" (re-probe 22, case 10); ``untyped_storage()``,
  ``storage()`` "Cannot access storage of OpaqueTensorImpl" (a tied-weights check, a memory estimator; re-probe 19's
  13 and 34, re-probe 20's 3); ``torch._C._has_storage`` answers False (a library's guarded read is skipped: re-probe
  20's 5);
- ``torch.save`` pickles a device tensor by a host copy and the device it is rebuilt on
  (``torch._utils._rebuild_device_tensor_from_cpu_tensor``; from a numpy array on torch 2.4), ``torch.load`` rebuilds
  it by ``.to(device)`` (realdml's round trip calls ``detach``/``_to_copy`` and ``lift_fresh``/``_to_copy``), never
  ``set_`` on the device (re-probe 20's 16); ``copy.deepcopy`` copies it by ``clone()``;
- torch 2.4.1's numpy pickling shows twice, raised in its words on torch 2.5+ (re-probe 21, 11 and 24): a
  ``weights_only=True`` load of a file holding device tensors fails (:func:`_load_as_on_directml`), and so does
  ``torch.save`` of one that requires grad (:func:`refuse_requiring_grad`).

``torch.load(..., map_location=<the device>)`` moves every storage it reads there (on torch 2.13 the host copy's too,
pickled as a CPU tensor) and torch would rebuild the tensor on it by ``set_``: a storage bound for the device stays on
the host, and the tensor pickled by its host copy is then rebuilt on the device from it. A checkpoint of
storage-backed tensors (CPU, CUDA) so loads onto the host (realdml raises there: torch-directml's ``device()``
compares a ``torch.device`` with an int). dmlprof's own code reads the storage as it is.
"""
from __future__ import annotations

import pickle
import sys
from contextlib import contextmanager
from typing import Callable, Optional

import torch

REDUCE = torch.Tensor.__reduce_ex__
DEEPCOPY = torch.Tensor.__deepcopy__
#: what reads a tensor's storage from Python, each as torch has it (torch.Tensor's or TensorBase's)
_STORAGE_READS = {name: getattr(torch.Tensor, name) for name in ("untyped_storage", "storage", "_typed_storage",
                                                               "data_ptr", "__dlpack__")}
#: the reads of the data pointer: torch-directml raises its own words for these (the others read the storage)
_DATA_POINTER_READS = ("data_ptr", "__dlpack__")
DATA_POINTER_REFUSED = "Cannot access data pointer of Tensor that doesn't have storage"
#: ``torch.utils.dlpack.to_dlpack`` (also ``torch.to_dlpack``): torch's C function, which reads the data pointer
TO_DLPACK = torch.utils.dlpack.to_dlpack
_TENSORS_OWN = {name for name in _STORAGE_READS if name in torch.Tensor.__dict__}
_HAS_STORAGE = torch._C._has_storage
OBJ_STATE = torch._utils._get_obj_state
LOAD = torch.load
#: how torch 2.5+ pickles a storage-less device tensor (a host copy), which its weights-only unpickler allows; torch
#: 2.4.1 (torch-directml's) pickles it from a numpy array, by the rebuild its weights-only unpickler refuses
_HOST_COPY_REBUILD = "_rebuild_device_tensor_from_cpu_tensor"
#: torch 2.4.1's words for it (measured on realdml, torch.load of a checkpoint of torch-directml's tensors)
WEIGHTS_ONLY_REFUSED = (
    "Weights only load failed. This file can still be loaded, to do so you have two options \n\t(1) Re-running "
    "`torch.load` with `weights_only` set to `False` will likely succeed, but it can result in arbitrary code "
    "execution. Do it only if you got the file from a trusted source.\n\t(2) Alternatively, to load with "
    "`weights_only=True` please check the recommended steps in the following error message.\n\tWeightsUnpickler "
    "error: Unsupported global: GLOBAL torch._utils._rebuild_device_tensor_from_numpy was not an allowed global by "
    "default. Please use `torch.serialization.add_safe_globals([_rebuild_device_tensor_from_numpy])` to allowlist "
    "this global if you trust this class/function.\n\nCheck the documentation of torch.load to learn more about "
    "types accepted by default with weights_only https://pytorch.org/docs/stable/generated/torch.load.html.")
#: torch 2.4.1's words, where a tensor requiring grad is pickled by ``self.cpu().numpy()``
REQUIRES_GRAD = "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
#: the device's type while one is installed
_device_type: Optional[str] = None
#: other device types a run answers with the installed device (``--from cuda``: ``map_location="cuda"``)
_aliases: set = set()
#: torch.serialization's place for a device's deserializer: after the CPU's (10), before CUDA's (20)
_LOAD_PRIORITY = 19
_registered: list = []
#: whether the installed device is torch-directml's (its reads refused), not MPS's or XPU's, which have storage
_as_directml = False


def install(device_type: str, refuse_reads: bool = True, reduce_ex: Optional[Callable] = None,
            deepcopy: Optional[Callable] = None) -> None:
    """``refuse_reads``: storage reads from outside dmlprof fail as on torch-directml and ``_has_storage`` answers
    False to them (False: only pickling and deep copies are torch-directml's, for MPS's and XPU's stand-ins).
    ``reduce_ex``/``deepcopy``: a device's own (the stand-in's), else :func:`reduce_ex`/:func:`deepcopy`."""
    global _device_type, _as_directml
    _device_type, _as_directml = device_type, refuse_reads
    torch.Tensor.__reduce_ex__ = reduce_ex or _reduce_ex
    torch.Tensor.__deepcopy__ = deepcopy or _deepcopy
    if refuse_reads:
        for name, read in _STORAGE_READS.items():
            setattr(torch.Tensor, name, _refused_storage_read(read, name))
        torch._C._has_storage = _has_storage_as_on_directml
        _set_to_dlpack(_refused_to_dlpack)
        if hasattr(torch._utils, _HOST_COPY_REBUILD):  # torch 2.5+: refused as torch 2.4.1 refuses its numpy rebuild
            torch.load = _load_as_on_directml
    if not _registered:  # torch keeps a registered deserializer for the process: it answers only while installed
        torch.serialization.register_package(_LOAD_PRIORITY, _tags_nothing, _kept_on_the_host)
        _registered.append(True)


def remove() -> None:
    global _device_type, _as_directml
    _device_type, _as_directml = None, False
    torch.Tensor.__reduce_ex__ = REDUCE
    torch.Tensor.__deepcopy__ = DEEPCOPY
    torch._C._has_storage = _HAS_STORAGE
    torch.load = LOAD
    _set_to_dlpack(TO_DLPACK)
    for name, read in _STORAGE_READS.items():
        if name in _TENSORS_OWN:
            setattr(torch.Tensor, name, read)
        elif name in torch.Tensor.__dict__:  # TensorBase's, shadowed while installed
            delattr(torch.Tensor, name)


@contextmanager
def installed(device_type: str):
    """:func:`install` (reads refused) for the length of the ``with`` block: the emulated device's runs."""
    install(device_type)
    try:
        yield
    finally:
        remove()


@contextmanager
def also_named(device_type: str):
    """While the run answers ``device_type``'s requests with the installed device (``--from cuda``), a storage
    ``torch.load`` would move to ``device_type`` (``map_location="cuda"``) is one bound for the device: it too stays
    on the host (re-probe 20, case 16)."""
    _aliases.add(device_type)
    try:
        yield
    finally:
        _aliases.discard(device_type)


def aliases() -> frozenset:
    """The device types the run answers with the installed device (:func:`also_named`)."""
    return frozenset(_aliases)


def is_device_tensor(tensor) -> bool:
    return _device_type is not None and isinstance(tensor, torch.Tensor) and tensor.device.type == _device_type


@contextmanager
def seen_without_storage(state: Optional[Callable] = None):
    """While torch pickles or deep-copies a device tensor: ``_has_storage`` False for the device's tensors, so torch
    takes its path for storage-less ones; ``state`` (if given) stands for ``torch._utils._get_obj_state``."""
    answer = torch._C._has_storage  # torch's, or torch-directml's answer (reads refused)
    torch._C._has_storage = _storage_less
    if state is not None:
        torch._utils._get_obj_state = state
    try:
        yield
    finally:
        torch._C._has_storage, torch._utils._get_obj_state = answer, OBJ_STATE


def _reduce_ex(self, proto):
    if not is_device_tensor(self):
        return REDUCE(self, proto)
    refuse_requiring_grad(self)
    with seen_without_storage():
        return REDUCE(self, proto)


def refuse_requiring_grad(tensor) -> None:
    """torch 2.4.1 pickles a storage-less device tensor by ``self.cpu().numpy()``, which refuses one requiring grad (a
    leaf made with ``requires_grad=True``, or a result of one; a Parameter pickles its ``.data``): measured on realdml,
    ``torch.save`` raises this; torch 2.13's host copy raised other words at the same line (re-probe 21, case 24)."""
    if _as_directml and tensor.requires_grad:
        raise RuntimeError(REQUIRES_GRAD)


def _load_as_on_directml(*args, **kwargs):
    """``torch.load``, refusing with ``weights_only=True`` a file holding the device's tensors, as torch 2.4.1 does
    (measured on realdml: :data:`WEIGHTS_ONLY_REFUSED`, whatever ``map_location``; a file of CPU tensors loads).
    Without ``weights_only``, torch 2.4.1 loads with False: torch-directml's torch decides, not the one predicting
    it (re-probe 21, case 11)."""
    if not kwargs.get("weights_only"):
        return LOAD(*args, **kwargs)
    try:
        with _host_copy_rebuild_refused():
            return LOAD(*args, **kwargs)
    except pickle.UnpicklingError as refused:
        if _HOST_COPY_REBUILD not in str(refused):
            raise
        raise pickle.UnpicklingError(WEIGHTS_ONLY_REFUSED) from None


@contextmanager
def _host_copy_rebuild_refused():
    """While it lasts, torch's weights-only unpickler does not allow the host-copy rebuild of a device tensor."""
    from torch import _weights_only_unpickler as unpickler

    allowed = unpickler._get_allowed_globals
    kept = {name: found for name, found in allowed().items() if not name.endswith("." + _HOST_COPY_REBUILD)}
    unpickler._get_allowed_globals = lambda: kept
    try:
        yield
    finally:
        unpickler._get_allowed_globals = allowed


def _deepcopy(self, memo):
    """By ``clone()``, as torch copies torch-directml's tensors (measured on realdml: views are not kept)."""
    if not is_device_tensor(self) or id(self) in memo:
        return DEEPCOPY(self, memo)
    with seen_without_storage():
        return DEEPCOPY(self, memo)


def _called_from_dmlprof(frame) -> bool:
    """Whether ``frame`` runs dmlprof's own code (``dmlprof.runner.user_code.is_dmlprof_code``, a layer above)."""
    return frame.f_globals.get("__name__", "").partition(".")[0] == "dmlprof"


def _refused_storage_read(read, name: str):
    """``read`` for every tensor but the device's, read from outside dmlprof: there it raises torch-directml's
    error (measured on realdml: a jagged nested tensor's ``values.untyped_storage()``, HF's tied-weight
    ``data_ptr()`` comparison)."""
    def reading(self, *args, **kwargs):
        if is_device_tensor(self) and not _called_from_dmlprof(sys._getframe(1)):  # the read's caller
            if name in _DATA_POINTER_READS:
                raise RuntimeError(DATA_POINTER_REFUSED)
            raise NotImplementedError("Cannot access storage of OpaqueTensorImpl")
        return read(self, *args, **kwargs)

    reading.__name__ = reading.__qualname__ = name
    reading.__doc__ = read.__doc__
    return reading


def _refused_to_dlpack(tensor, *args, **kwargs):
    """``to_dlpack`` of a device tensor, from outside dmlprof: torch-directml's data-pointer error (measured on
    realdml, re-probe 22, case 10); where it ran, a consumer (numpy, CuPy, JAX) took the emulated host memory."""
    if is_device_tensor(tensor) and not _called_from_dmlprof(sys._getframe(1)):
        raise RuntimeError(DATA_POINTER_REFUSED)
    return TO_DLPACK(tensor, *args, **kwargs)


def _set_to_dlpack(function) -> None:
    torch.utils.dlpack.to_dlpack = function
    if hasattr(torch, "to_dlpack"):
        torch.to_dlpack = function


def _has_storage_as_on_directml(tensor) -> bool:
    """``torch._C._has_storage`` as torch-directml answers it: False for its tensors, asked from outside dmlprof
    (measured on realdml: a library's guard ``_has_storage(h) and h.data_ptr()`` skips the read; re-probe 20,
    case 5); dmlprof's own code is told what the device holds."""
    if is_device_tensor(tensor) and not _called_from_dmlprof(sys._getframe(1)):
        return False
    return _HAS_STORAGE(tensor)


def _storage_less(tensor) -> bool:
    return False if is_device_tensor(tensor) else _HAS_STORAGE(tensor)


def _tags_nothing(storage) -> None:
    return None  # what a storage is saved as stays torch's


def _kept_on_the_host(storage, location: str):
    """A storage torch.load would move onto the device, left on the host (None: not one)."""
    if _device_type is None or location.split(":", 1)[0] not in {_device_type, *_aliases}:
        return None
    return storage
