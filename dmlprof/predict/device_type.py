"""Under ``--target mps`` (or ``xpu``) the model's code sees a device of the target's type.

The stand-in is a PrivateUse1 device (torch routes its tensors by that type), so without this a model's
``if x.device.type == "mps":`` reads "privateuseone" and takes the branch the real device never runs: diffusers'
timestep guard builds float64 timesteps off MPS, and the prediction reported a float64 failure at a line MPS never
reaches (re-probe 16's 17). For the prediction's length a ``TorchFunctionMode`` (Python-level only: it changes no
dispatcher path) answers, for the stand-in's tensors:

- ``x.device`` with the target's type and the same index, and ``x.is_mps`` / ``x.is_xpu`` with True;
- a device argument naming the target's type (``torch.zeros(n, device=x.device)``, ``.to("mps")``) with the
  stand-in, where the tensor is really made; ``torch.device("mps")`` itself (``torch.device(x.device.type, 0)``)
  stays a device of the target's type, and a default device of the target's type (``torch.set_default_device``,
  ``with torch.device("mps"):``) makes the factories' tensors on the stand-in.

dmlprof's own code (the stand-in's kernels, the recorder) reads the real device: an access from one of its frames
is answered as without the mode. torch's own Python code called by the model sees the target's type, as on the
device (an optimizer choosing its implementation by ``p.device.type``), and its fast paths' test for overrides
(``torch.overrides.has_torch_function``) is answered as without the mode.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _device

from dmlprof.backends.remap import device_arguments_mapped, overrides_test_ignores
from dmlprof.runner.user_code import is_dmlprof_code


class _ReadsAsTarget(TorchFunctionMode):
    def __init__(self, target_type: str, stand_in: torch.device):
        super().__init__()
        self.target_type, self.stand_in = target_type, stand_in
        # the getters' descriptors: the mode is handed their __get__, whose __self__ is the descriptor
        self._device = torch._C.TensorBase.device
        self._is_target = getattr(torch._C.TensorBase, f"is_{target_type}", None)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        getter = getattr(func, "__self__", None)
        if getter is self._device:
            device = func(*args, **kwargs)
            # the frame that read ``.device``, above this one (the getter is C and adds none)
            if device.type == self.stand_in.type and not is_dmlprof_code(sys._getframe(1)):
                return torch.device(self.target_type, device.index)
            return device
        if getter is self._is_target and self._is_target is not None:
            return args[0].device.type == self.stand_in.type or func(*args, **kwargs)
        if func is torch.device:  # a device built of the target's type stays one (mapped where it is an argument)
            return func(*args, **kwargs)
        if kwargs.get("device") is None and func in _device._device_constructors():
            # A default device of the target's type (torch.set_default_device(x.device), with torch.device("mps")):
            # torch's DeviceContext fills it in below this mode on torch 2.13 (it keeps itself at the bottom of the
            # stack), where no mapping would follow and the factory ran on the real, absent device (re-probe 20's 2);
            # filled in here, it is mapped as any device argument naming the target.
            default = _device.CURRENT_DEVICE
            if default is not None and default.type == self.target_type:
                kwargs = {**kwargs, "device": default}
        args, kwargs = device_arguments_mapped(args, kwargs, self.target_type, self.stand_in) or (args, kwargs)
        return func(*args, **kwargs)


@contextmanager
def device_reads_as_target(target_type: str, stand_in: torch.device):
    """For the block, the stand-in's tensors read as on a device of ``target_type`` (see the module)."""
    with overrides_test_ignores(_ReadsAsTarget), _ReadsAsTarget(target_type, stand_in):
        yield
