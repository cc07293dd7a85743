"""A ``torch_directml`` module for scripts scanned on a stand-in DirectML device (emulated or predicted).

Scripts written for DirectML start with ``import torch_directml`` and
``dml = torch_directml.device()``. On a machine without DirectML the real
package is missing or cannot load (on plain Linux its import fails with
"libd3d12.so: cannot open shared object file"), and beside dmlprof's emulated
device it could not load anyway (both would own ``privateuseone``). While such
a script runs under dmlprof, this module answers in its place with
torch-directml 0.2.5's public API, its devices being the stand-in's.
"""
from __future__ import annotations

import sys
import types
from contextlib import contextmanager
from pathlib import Path

MODULE = "torch_directml"
#: a folder holding only a ``torch_directml`` for the processes a scanned script spawns (see its docstring)
SPAWNED_STAND_IN = str(Path(__file__).resolve().parent / "spawned_stand_in")
#: torch-directml's fused kernels: DirectML-only ops with no stand-in
_FUSED = ("multi_head_attention", "mlp_phi2", "mlp_llama", "mlp_phi3", "rmsnorm", "apply_rotary_position_emb")


def shim_module(backend) -> types.ModuleType:
    """``torch_directml`` with one device: ``backend``'s."""
    import torch

    module = types.ModuleType(MODULE, f"dmlprof's stand-in for torch-directml 0.2.5 ({backend.device_name()})")
    module.__version__ = "0.2.5.dev240914"
    module.__dmlprof_stand_in__ = True

    def check(device_id):
        if device_id is not None and device_id != 0:
            raise Exception(f"Invalid device_id argument supplied {device_id}. device_id must be in range [0, 1).")

    def device(device_id=None):
        check(device_id)
        return torch.device(backend.device_type, 0)

    def gpu_memory(device_id=0, mb_per_tile=1):
        check(device_id)
        reading = backend.memory()
        used = (reading.allocated_bytes or 0) / (1 << 20)
        return [used / max(mb_per_tile, 1)]

    module.is_available = lambda: True
    module.device_count = lambda: 1
    module.default_device = lambda: 0
    module.device = device
    module.device_name = lambda device_id=0: backend.device_name() if device_id == 0 else ""
    module.has_float64_support = lambda device_id=0: bool(getattr(backend, "float64_support", False))
    module.disable_tiled_resources = lambda is_disabled: None
    module.gpu_memory = gpu_memory
    for name in _FUSED:
        setattr(module, name, _unsupported(name))
    return module


def _unsupported(name: str):
    def fused(*args, **kwargs):
        raise NotImplementedError(
            f"torch_directml.{name} is a DirectML-only fused kernel; dmlprof's stand-in device has no "
            "equivalent (scan this script on DirectML hardware, or use the plain PyTorch ops it replaces)")

    fused.__name__ = name
    return fused


@contextmanager
def installed(backend):
    """``import torch_directml`` gives the stand-in while the block runs, whatever is installed; a process the
    block spawns (multiprocessing's ``spawn`` hands it this ``sys.path``) finds one too."""
    saved = sys.modules.get(MODULE)
    sys.modules[MODULE] = shim_module(backend)
    # a backend's own (its spawned processes set its device up, as torch-directml's have the device), else one
    # that names the device and makes no tensor
    folder = getattr(backend, "spawned_stand_in", None) or SPAWNED_STAND_IN
    added = folder not in sys.path
    if added:
        # ahead of the installed packages, as the stand-in takes this process's import whatever is installed (an
        # installed torch-directml that cannot load here, without libd3d12, ended the worker as a missing one
        # did); behind sys.path[0], the script's own folder, which scripts read (os.path.join(sys.path[0], ...))
        sys.path.insert(1 if sys.path else 0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
        if saved is None:
            sys.modules.pop(MODULE, None)
        else:
            sys.modules[MODULE] = saved
