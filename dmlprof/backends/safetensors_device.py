"""safetensors loading straight onto the scanned device, as it goes on torch-directml (re-probe 22, case 13).

safetensors parses ``load_file(path, device=...)``'s and ``safe_open(path, framework="pt", device=...)``'s device
itself (in Rust) and takes CPU, CUDA, MPS, XPU and a few others' names, never torch-directml's: measured on realdml
(safetensors 0.8), ``str(torch_directml.device())``, the ``torch.device`` itself, ``"privateuseone"`` and ``"dml"``
each raise ``SafetensorError: device <it> is invalid``. A script ported from CUDA passes its device there; under
``--from cuda`` the script's ``"cuda"`` reached safetensors, which took it and moved the tensors to the scanned
device, so the load passed where DirectML's fails. While a run answers ``--from`` requests with a DirectML device,
such a device is refused in the words safetensors gives the DirectML device it stands for (the fix, measured to
run on realdml: load on ``"cpu"``, then ``load_state_dict`` or ``.to(device)``). A device naming the CPU, and runs
where safetensors is not installed, are left alone.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

#: where ``safe_open`` is looked up: the package's own name, and the module ``load_file`` opens files through
_MODULES = ("safetensors", "safetensors.torch")
#: the frameworks whose tensors ``device`` places (torch's spellings)
_TORCH_FRAMEWORKS = ("pt", "torch", "pytorch")


def names_source(device, source: str) -> bool:
    """Whether safetensors' ``device`` argument names the ``--from`` device (an int is a CUDA index to safetensors)."""
    if isinstance(device, torch.device):
        return device.type == source
    if isinstance(device, str):
        return device.split(":", 1)[0] == source
    return source == "cuda" and isinstance(device, int) and not isinstance(device, bool)


def refusal(device, target: torch.device) -> str:
    """safetensors' words for the DirectML device the script's ``device`` stands for: a ``torch.device`` is shown
    by its repr, a string or an index as the device's string (measured on realdml)."""
    shown = repr(target) if isinstance(device, torch.device) else str(target)
    return f"device {shown} is invalid"


@contextmanager
def refused_for(source: str, target: torch.device):
    """For the block, safetensors' ``safe_open`` (and ``load_file``, which opens with it) refuses a device naming
    ``source`` with safetensors' own error, as it refuses ``target`` (the DirectML device) on torch-directml."""
    modules = _loaded_safetensors()
    if not modules:
        yield
        return
    error = getattr(modules[0], "SafetensorError", RuntimeError)
    saved = [(module, module.safe_open) for module in modules]

    def refusing(original):
        def safe_open(filename, framework, device="cpu", *args, **kwargs):
            if framework in _TORCH_FRAMEWORKS and names_source(device, source):
                raise error(refusal(device, target))
            return original(filename, framework, device, *args, **kwargs)

        safe_open.__doc__, safe_open.__wrapped__ = original.__doc__, original
        return safe_open

    try:
        for module, original in saved:
            module.safe_open = refusing(original)
        yield
    finally:
        for module, original in saved:
            module.safe_open = original


def _loaded_safetensors() -> list:
    """safetensors' modules that hold ``safe_open``, imported here where it is installed (the script's later
    ``from safetensors.torch import load_file`` then finds the refusing one); none where it is not."""
    try:
        import importlib

        return [importlib.import_module(name) for name in _MODULES]
    except Exception:  # not installed, or a build that does not import here: nothing of safetensors' to answer for
        return []
