"""The bare run's device set-up, written independently of dmlprof's own.

The "without dmlprof" run of a script still needs the device the script asks
for. A DirectML script imports ``torch_directml``; a CUDA script asks for
``"cuda"``. Here both are pointed at the emulated DirectML device
(``privateuseone:0``) with a few lines of plain patching, and nothing else:
no dispatch or function mode, no recorder, so what ATen does is what it does
for the user.

The CUDA mapping covers what scripts commonly call (device strings and
``torch.device`` objects in ``.to()``/``.cuda()``/factory ``device=``,
``torch.cuda.is_available/device_count/current_device/synchronize``, memory
counters, seeding; DataLoaders do not pin memory, as on DirectML). A script reaching further fails in the bare run, and the
harness then says the oracle could not run it rather than judging dmlprof.
"""
from __future__ import annotations

import sys
import types

import torch

DEVICE_TYPE = "privateuseone"
_FACTORIES = (
    "arange", "empty", "empty_strided", "eye", "full", "linspace", "logspace", "ones", "rand", "randint",
    "randn", "randperm", "tensor", "as_tensor", "zeros", "empty_like", "full_like", "ones_like",
    "rand_like", "randint_like", "randn_like", "zeros_like",
)


def torch_directml_stub() -> types.ModuleType:
    """torch-directml 0.2.5's public functions, for one emulated adapter."""
    module = types.ModuleType("torch_directml")
    module.__version__ = "0.2.5.dev240914"
    module.device = lambda device_id=None: torch.device(DEVICE_TYPE, device_id or 0)
    module.device_count = lambda: 1
    module.is_available = lambda: True
    module.default_device = lambda: 0
    module.device_name = lambda device_id=0: "emulated DirectML device"
    module.has_float64_support = lambda device_id=0: True
    module.gpu_memory = lambda device_id=0, mb_per_tile=1: [0]
    module.disable_tiled_resources = lambda is_disabled=True: None
    return module


def install_directml() -> None:
    """``import torch_directml`` gets the stub, whatever is installed."""
    sys.modules["torch_directml"] = torch_directml_stub()


def _mapped(value):
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device(DEVICE_TYPE, value.index or 0)
    if isinstance(value, str) and value.split(":")[0] == "cuda":
        return torch.device(DEVICE_TYPE, 0)
    return value


def _map_args(args, kwargs):
    args = tuple(_mapped(a) for a in args)
    if "device" in kwargs:
        kwargs = dict(kwargs, device=_mapped(kwargs["device"]))
    return args, kwargs


def install_cuda_mapping() -> None:
    """Requests for ``cuda`` land on the emulated device."""
    tensor_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        args, kwargs = _map_args(args, kwargs)
        return tensor_to(self, *args, **kwargs)

    def tensor_cuda(self, device=None, non_blocking=False, **kwargs):
        return tensor_to(self, torch.device(DEVICE_TYPE, 0), non_blocking=non_blocking)

    def module_cuda(self, device=None):
        return self.to(torch.device(DEVICE_TYPE, 0))

    torch.Tensor.to = to
    torch.Tensor.cuda = tensor_cuda
    # Page-locked memory is a CUDA host allocation; the emulated device's memory is the host's own, and
    # torch-directml users' DataLoaders do not pin (torch 2.4.1 pins only when CUDA is available): no
    # pin-memory thread, batches arrive on the thread that iterates, as on DirectML.
    torch.Tensor.pin_memory = lambda self, *args, **kwargs: self
    loader_init = torch.utils.data.DataLoader.__init__

    def loader_without_pinning(self, *args, **kwargs):
        loader_init(self, *args, **kwargs)
        self.pin_memory = False

    torch.utils.data.DataLoader.__init__ = loader_without_pinning
    torch.nn.Module.cuda = module_cuda
    for name in _FACTORIES:
        setattr(torch, name, _device_mapping(getattr(torch, name)))
    device_module = getattr(torch, DEVICE_TYPE)
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.set_device = lambda device: None
    cuda.synchronize = lambda device=None: None
    cuda.get_device_name = lambda device=None: "emulated DirectML device"
    cuda.empty_cache = lambda: None
    for counter in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(cuda, counter, lambda device=None: 0)
    cuda.reset_peak_memory_stats = lambda device=None: None
    # Optimizers ask this whenever torch.cuda.is_available() (CUDA-graph capture check); on a CUDA build of
    # torch without a GPU the real call fails with "CUDA driver version is insufficient".
    cuda.is_current_stream_capturing = lambda: False
    for seeding in ("manual_seed", "manual_seed_all"):
        if hasattr(device_module, seeding):
            setattr(cuda, seeding, getattr(device_module, seeding))


def _device_mapping(factory):
    def wrapped(*args, **kwargs):
        if "device" in kwargs:
            kwargs = dict(kwargs, device=_mapped(kwargs["device"]))
        return factory(*args, **kwargs)

    wrapped.__wrapped__ = factory
    wrapped.__name__ = getattr(factory, "__name__", "factory")
    return wrapped
