"""Device backends and the one place that chooses between them."""
from __future__ import annotations

from dmlprof.backends.base import Availability, Backend, MemoryReading
from dmlprof.backends.cpu import CpuBackend
from dmlprof.backends.cuda import CudaBackend
from dmlprof.backends.dml import DmlBackend
from dmlprof.backends.mps import MpsBackend
from dmlprof.backends.xpu import XpuBackend
from dmlprof.errors import DeviceError


def _emulated():
    from dmlprof.backends.emulated import EmulatedDmlBackend

    return EmulatedDmlBackend


BACKENDS = {
    "cpu": lambda: CpuBackend,
    "cuda": lambda: CudaBackend,
    "dml": lambda: DmlBackend,
    "mps": lambda: MpsBackend,
    "xpu": lambda: XpuBackend,
    "emulated-dml": _emulated,
}
DEVICE_CHOICES = ("auto",) + tuple(BACKENDS)
# What --device auto tries, in order; the emulated device is never chosen for you.
AUTO_ORDER = ("cuda", "xpu", "mps", "dml")


def backend_class(name: str):
    try:
        return BACKENDS[name]()
    except KeyError:
        raise DeviceError(f"unknown device {name!r}; choose one of {', '.join(DEVICE_CHOICES)}") from None


def resolve_backend(name: str = "auto", index: int = 0) -> Backend:
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


__all__ = [
    "Availability",
    "Backend",
    "MemoryReading",
    "DEVICE_CHOICES",
    "backend_class",
    "resolve_backend",
]
