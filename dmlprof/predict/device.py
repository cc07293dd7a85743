"""A stand-in ``privateuseone`` device, so prediction runs on the dispatcher's real PrivateUse1 paths.

Prediction must make every device-dependent choice as torch makes it on
torch-directml's device: the LSTM cell (``input.is_privateuseone()`` picks
``_thnn_fused_lstm_cell``), dropout (``native_dropout``), convolution
(``convolution_overrideable``), scaled_dot_product_attention's kernel choice,
the optimizers' foreach default. Those checks read the tensor's device, so the
predicted tensors (meta storage) report ``privateuseone:0``.

Autograd then needs what any PrivateUse1 backend registers: a device guard
(every autograd node records its input's stream through it) and, on torch >=
2.6, accelerator hooks and a device module. Where a real PrivateUse1 backend is
already loaded (torch-directml, dmlprof's emulated device) its own are used and
nothing is registered. Otherwise:

* torch with ``torch._C._acc`` (2.6 and later): torch's own Python hooks for a
  Python PrivateUse1 backend (``torch.utils.backend_registration``).
* older torch (2.4, 2.5: what torch-directml pins): torch has no Python way to
  register a guard, so a no-op guard is built from the Meta device's (copied
  virtual table, ``getDefaultStream`` answered by ``getStream``) and stored in
  c10's guard registry. That needs the Itanium C++ ABI (Linux, macOS) and the
  header torch ships, from which the slot order is read rather than assumed.

These registrations are process-wide and stay for the life of the process
(torch offers no way to remove them); a real PrivateUse1 backend loaded later
replaces them with its own. Nothing here allocates device memory: predicted
tensors never have storage on the device.
"""
from __future__ import annotations

import ctypes
import re
import sys
import types
from pathlib import Path
from typing import Optional

import torch

from dmlprof.directml.device_module import host_device_module
from dmlprof.errors import DmlprofError

_state: dict = {}
_keep_alive: list = []  # the hand-built guard's memory must outlive the process's use of it


class PredictDeviceError(DmlprofError):
    """The stand-in device cannot be set up with this torch on this platform."""


def device_name() -> str:
    """``privateuseone`` unless a backend renamed the key."""
    return torch._C._get_privateuse1_backend_name()


def backend_loaded() -> bool:
    """Whether a real PrivateUse1 backend (with its own guard) is loaded in this process."""
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key("aten::empty.memory_format", "PrivateUse1"))


def ensure_device() -> dict:
    """Make ``privateuseone`` usable for device tensors with autograd; returns how (cached).

    Raises :class:`PredictDeviceError` where it cannot be done.
    """
    if _state:
        return dict(_state)
    if backend_loaded():
        _state.update(how="existing PrivateUse1 backend")
    elif hasattr(torch._C, "_acc") and hasattr(torch._C._acc, "register_python_privateuseone_device_guard"):
        _register_python_backend()
        _state.update(how="torch's Python PrivateUse1 hooks")
    else:
        _register_noop_guard()
        if not hasattr(torch, device_name()):  # `.to(device)` asks the device module to initialise
            torch._register_device_module(device_name(), _device_module(device_name()))
        _state.update(how="no-op device guard (torch < 2.6)")
    return dict(_state)


# -- torch >= 2.6 -----------------------------------------------------------------
def _register_python_backend() -> None:
    from torch.utils import backend_registration as reg

    name = device_name()
    if name == "privateuseone":
        # The accelerator API counts PrivateUse1 only once it is "registered"
        # by name; renaming to the default name registers it and keeps the
        # devices printing as torch-directml's do.
        torch.utils.rename_privateuse1_backend("privateuseone")
    torch._C._acc.register_python_privateuseone_device_guard(reg._DummyDeviceGuard())
    torch._C._acc.register_python_privateuseone_hook(reg._DummyPrivateUse1Hook())
    if not hasattr(torch, name):
        torch._register_device_module(name, _device_module(name))


def _device_module(name: str) -> types.ModuleType:
    """The ``torch.<name>`` module torch asks about an accelerator (availability, seeds)."""
    # Random ops computing values run the CPU's kernels, with the CPU's generator (as the emulated device does)
    return host_device_module(f"dmlprof_predicted_{name}", name, "predicted device (no memory)", seeds_cpu=True)


# -- torch < 2.6 ------------------------------------------------------------------
_REGISTRY_SYMBOL = "_ZN3c104impl26device_guard_impl_registryE"


def _c10_library() -> ctypes.CDLL:
    lib_dir = Path(torch.__file__).resolve().parent / "lib"
    names = {"darwin": ["libc10.dylib"], "linux": ["libc10.so"]}
    for candidate in names.get("darwin" if sys.platform == "darwin" else "linux", []):
        path = lib_dir / candidate
        if path.exists():
            return ctypes.CDLL(str(path))
    raise PredictDeviceError(f"prediction needs torch's libc10 in {lib_dir}; not found")


def guard_slots(header: Optional[Path] = None) -> tuple:
    """(getStream, getDefaultStream, methods before them) slot indices, read from torch's header."""
    slots, count = _guard_interface(header)
    return slots["getStream"], slots["getDefaultStream"], count


def _guard_interface(header: Optional[Path] = None) -> tuple:
    """``({virtual method: slot index}, slot count)`` of torch's DeviceGuardImplInterface, read from its header."""
    header = header or Path(torch.__file__).resolve().parent / "include" / "c10" / "core" / "impl" / "DeviceGuardImplInterface.h"
    if not header.exists():
        raise PredictDeviceError(f"prediction on torch {torch.__version__} needs torch's C++ headers ({header} is missing)",
                                 remedy="reinstall torch from its wheel, or use torch >= 2.6")
    text = header.read_text(encoding="utf-8", errors="replace")
    start = text.find("struct C10_API DeviceGuardImplInterface")
    end = text.find("\n};", start)
    body = re.sub(r"//[^\n]*", "", text[start:end])
    names = re.findall(r"virtual\s+[^;{(]*?(~?\w+)\s*\(", body)
    slots, index = {}, 0
    for name in names:
        slots.setdefault(name, index)
        index += 2 if name.startswith("~") else 1  # Itanium ABI: complete + deleting destructor
    if "getStream" not in slots or "getDefaultStream" not in slots:
        raise PredictDeviceError("could not read the device guard interface from torch's header")
    return slots, index


def _own_device_answers() -> dict:
    """ctypes functions for the guard's slots that name a device: c10::DeviceType is one byte, c10::Device two
    (type, index), both returned and passed in a register (x86-64 and arm64 C ABIs: small trivially-copyable)."""
    own = int(torch._C._autograd.DeviceType.PrivateUse1) if hasattr(torch._C._autograd, "DeviceType") else 20
    device = own  # c10::Device{PrivateUse1, 0}: the type byte, then index 0
    return {
        "type": ctypes.CFUNCTYPE(ctypes.c_uint8, ctypes.c_void_p)(lambda this: own),
        "getDevice": ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_void_p)(lambda this: device),
        "exchangeDevice": ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_void_p, ctypes.c_uint16)(lambda this, _: device),
    }


#: kept alive for as long as the guard that points at them (the process)
_OWN_DEVICE_ANSWERS: dict = {}


def _register_noop_guard() -> None:
    if sys.platform == "win32":
        raise PredictDeviceError(
            f"prediction on Windows needs torch >= 2.6 (this is torch {torch.__version__})",
            remedy="run `dmlprof scan --target dml` under a newer torch, or on Linux/WSL",
        )
    named, count = _guard_interface()
    get_stream, get_default_stream = named["getStream"], named["getDefaultStream"]
    lib = _c10_library()
    base = ctypes.addressof(ctypes.c_void_p.in_dll(lib, _REGISTRY_SYMBOL))
    meta_index = int(torch._C._autograd.DeviceType.Meta) if hasattr(torch._C._autograd, "DeviceType") else 14
    own_index = int(torch._C._autograd.DeviceType.PrivateUse1) if hasattr(torch._C._autograd, "DeviceType") else 20
    slots = (ctypes.c_void_p * (own_index + 1)).from_address(base)
    if slots[own_index]:
        return  # a guard is registered already (a backend without kernels yet)
    meta_guard = slots[meta_index]
    if not meta_guard:
        raise PredictDeviceError("torch has no Meta device guard to build the stand-in from")
    vtable = ctypes.c_void_p.from_address(meta_guard).value
    _OWN_DEVICE_ANSWERS.update(_own_device_answers())
    # Copy offset-to-top, type info and every virtual slot; answer
    # getDefaultStream with getStream (same signature), which the Meta guard
    # does not implement and the autograd engine calls for accumulation.
    source = (ctypes.c_void_p * (count + 2)).from_address(vtable - 2 * ctypes.sizeof(ctypes.c_void_p))
    table = (ctypes.c_void_p * (count + 2))(*source)
    table[2 + get_default_stream] = table[2 + get_stream]
    # The Meta guard's type(), getDevice() and exchangeDevice() answer the meta device: where torch asks
    # the guard which device an index-less "privateuseone" is (torch 2.4.1's x.new_tensor(2.0), .to() with
    # no index), it made the tensor on meta ("Tensor on device meta is not on the expected device").
    # Answered as the device's own guard answers: this device, index 0.
    for name, answer in _OWN_DEVICE_ANSWERS.items():
        if name in named:
            table[2 + named[name]] = ctypes.cast(answer, ctypes.c_void_p).value
    instance = (ctypes.c_void_p * 1)(ctypes.addressof(table) + 2 * ctypes.sizeof(ctypes.c_void_p))
    _keep_alive.extend([table, instance])
    slots[own_index] = ctypes.addressof(instance)
