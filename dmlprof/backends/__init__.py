"""Device backends and the one place that chooses between them.

Importing this package costs nothing: each backend module (and torch) is
imported when a backend is asked for, so the CLI can list ``--device``
choices without loading torch.
"""
from __future__ import annotations

from importlib import import_module

from dmlprof.errors import DeviceError

#: ``--device`` name -> the module and class of its backend
BACKENDS = {
    "cpu": ("dmlprof.backends.cpu", "CpuBackend"),
    "cuda": ("dmlprof.backends.cuda", "CudaBackend"),
    "dml": ("dmlprof.backends.dml", "DmlBackend"),
    "mps": ("dmlprof.backends.mps", "MpsBackend"),
    "xpu": ("dmlprof.backends.xpu", "XpuBackend"),
    "emulated-dml": ("dmlprof.backends.emulated", "EmulatedDmlBackend"),
}
DEVICE_CHOICES = ("auto",) + tuple(BACKENDS)
# What --device auto tries, in order; the emulated device is never chosen for you.
AUTO_ORDER = ("cuda", "xpu", "mps", "dml")
# Names this package exports, loaded on first use.
_LAZY = {"Availability": "dmlprof.backends.base", "Backend": "dmlprof.backends.base",
         "MemoryReading": "dmlprof.backends.base",
         **{cls: module for module, cls in BACKENDS.values()}}


def backend_class(name: str):
    """The backend class for ``--device NAME`` (its module imported now); raises DeviceError."""
    try:
        module, cls = BACKENDS[name]
    except KeyError:
        raise DeviceError(f"unknown device {name!r}; choose one of {', '.join(DEVICE_CHOICES)}") from None
    return getattr(import_module(module), cls)


def resolve_backend(name: str = "auto", index: int = 0):
    """The backend for ``--device NAME``, checked safely; raises DeviceError."""
    if name == "auto":
        for candidate in AUTO_ORDER:
            if backend_class(candidate).availability().available:
                name = candidate
                break
        else:
            name = "cpu"
    cls = backend_class(name)
    status = cls.availability()
    if not status.available:
        raise DeviceError(f"device {name!r} is not available: {status.reason}")
    backend = cls(index)
    backend.prepare()
    return backend


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dmlprof.backends' has no attribute {name!r}")


__all__ = ["Availability", "Backend", "MemoryReading", "DEVICE_CHOICES", "AUTO_ORDER", "BACKENDS", "backend_class",
           "resolve_backend"]
