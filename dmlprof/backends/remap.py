"""``scan --from cuda``: a script's requests for one device, answered by the device being scanned.

A script written for CUDA (``device = "cuda"``, ``.cuda()``,
``torch.cuda.is_available()``) asks "what would this do on DirectML?" by running
with its CUDA requests mapped onto the scanned device: device arguments of
torch functions (``.to("cuda")``, ``torch.zeros(..., device="cuda")``,
``.cuda()``, ``is_cuda``) through a ``TorchFunctionMode`` (Python-level only: it
changes no dispatcher path, unlike a dispatch mode), and the ``torch.cuda``
(or ``torch.mps``) queries a training script makes (availability, device
count and name, synchronize, memory readings, seeds) by functions that answer
for the scanned device. Autocast and gradient scaling for the source device
become the scanned device's. Pinning host memory, which only a CUDA host can
do, is skipped (it changes where a batch waits, not what is computed).

All of it is undone when the script ends.
"""
from __future__ import annotations

import types
from contextlib import ExitStack, contextmanager

import torch
from torch.overrides import TorchFunctionMode

SOURCES = ("cuda", "mps")


def _maps(value, source: str) -> bool:
    if isinstance(value, torch.device):
        return value.type == source
    if isinstance(value, str):
        return value.split(":", 1)[0] == source
    return False


class _DeviceArguments(TorchFunctionMode):
    """Device arguments naming ``source`` become ``target``."""

    def __init__(self, source: str, target: torch.device):
        super().__init__()
        self.source, self.target = source, target
        self._to_source = getattr(torch.Tensor, source, None)  # Tensor.cuda
        self._is_source = getattr(torch.Tensor, f"is_{source}").__get__  # Tensor.is_cuda

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.device and _maps(args[0] if args else kwargs.get("type"), self.source):
            return self.target  # torch.device("cuda", 0): the type and index of the one scanned device
        if func is self._to_source and func is not None:
            non_blocking = kwargs.get("non_blocking", False)
            return args[0].to(self.target, non_blocking=non_blocking)
        if func is self._is_source:
            return args[0].device.type == self.target.type
        if any(_maps(a, self.source) for a in args) or any(_maps(v, self.source) for v in kwargs.values()):
            args = tuple(self.target if _maps(a, self.source) else a for a in args)
            kwargs = {k: self.target if _maps(v, self.source) else v for k, v in kwargs.items()}
        return func(*args, **kwargs)


def _properties(backend):
    reading = backend.memory()
    # gcnArchName: what torch._inductor's cache key reads for the device's name on a torch built without CUDA
    return types.SimpleNamespace(name=backend.device_name(), total_memory=reading.total_bytes or 0,
                                 major=0, minor=0, multi_processor_count=1, gcnArchName=backend.device_name())


def _random_state(device: torch.device):
    """(get, set, initial seed) of the random state ``device``'s random calls draw from: its own module's where
    torch has one (``torch.xpu``, ``torch.mps``), else the CPU's default generator (the CPU's, the emulated DirectML
    device's, and torch-directml's: its ``manual_seed_all`` seeds that generator)."""
    module = getattr(torch, device.type, None)
    if device.type != "cpu" and hasattr(module, "get_rng_state") and hasattr(module, "set_rng_state"):
        read, write = module.get_rng_state, module.set_rng_state  # taken now: the answers replace module functions
        first_seed = getattr(module, "initial_seed", torch.initial_seed)  # torch.mps has none
    else:
        read, write, first_seed = torch.get_rng_state, torch.set_rng_state, torch.initial_seed

    def get_rng_state(device=None):
        return read()

    def set_rng_state(state, device=None):
        write(state)

    return get_rng_state, set_rng_state, first_seed


def _device_index(target: torch.device):
    """torch.cuda's device-index check, taking the scanned device for CUDA device 0: with every CUDA device argument
    mapped, ``torch.device("cuda")`` is the scanned device, which the check refused ("Expected a cuda device"). torch.load
    validates its ``map_location`` through it (``map_location="cuda"``, a resume script's ``map_location=device``)."""
    check = torch.cuda._utils._get_device_index  # taken now: the answer replaces it

    def _get_device_index(device, optional=False, allow_cpu=False):
        if _maps(device, "cuda") or (isinstance(device, torch.device) and device.type == target.type):
            return 0  # the one device, as device_count() answers
        return check(device, optional, allow_cpu)

    return _get_device_index


def _module_answers(source: str, backend) -> dict:
    """(module, attribute) -> the stand-in for the source device's queries."""
    def allocated(device=None):
        return backend.memory().allocated_bytes or 0

    def peak(device=None):
        return backend.memory().peak_bytes or 0

    get_rng_state, set_rng_state, initial_seed = _random_state(backend.device())
    common = {
        "synchronize": lambda device=None: backend.synchronize(),
        "empty_cache": lambda: None,
        "manual_seed": lambda seed: None,  # torch.manual_seed seeds every device already
        "manual_seed_all": lambda seed: None,
        "seed": lambda: None,  # as manual_seed: the scanned device's generator is left as torch's seeding left it
        # a saved random state, restored (a checkpoint's; Dynamo saves and restores it around each frame it
        # compiles, once the source device is said to be there): the scanned device's
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
    }
    if source == "cuda":
        answers = {
            "is_available": lambda: True,
            "device_count": lambda: 1,
            "current_device": lambda: 0,
            "set_device": lambda device: None,
            "get_device_name": lambda device=None: backend.device_name(),
            "get_device_properties": lambda device=None: _properties(backend),
            "get_device_capability": lambda device=None: (0, 0),
            "is_bf16_supported": lambda *a, **k: False,
            # The optimizers ask whether a CUDA graph is being captured before each step.
            "is_current_stream_capturing": lambda: False,
            # (Events and streams are left alone: torch._dynamo, which the optimizers import,
            # checks torch.cuda.Event's class; a script timing with CUDA events fails in one line.)
            "memory_allocated": allocated,
            "max_memory_allocated": peak,
            "memory_reserved": allocated,
            "max_memory_reserved": peak,
            "reset_peak_memory_stats": lambda device=None: backend.reset_peak_memory(),
            "reset_max_memory_allocated": lambda device=None: backend.reset_peak_memory(),
            "mem_get_info": lambda device=None: (0, backend.memory().total_bytes or 0),
            "get_rng_state_all": lambda: [get_rng_state()],  # one device, as device_count() answers
            "set_rng_state_all": lambda states: set_rng_state(states[0]),
            # the rest of torch.cuda.random's API (tests/unit/test_remap_compiled.py holds every name of it answered)
            "seed_all": lambda: None,
            "initial_seed": lambda: initial_seed(),
            **common,
        }
        return {**{(torch.cuda, name): fn for name, fn in answers.items()},
                (torch.cuda._utils, "_get_device_index"): _device_index(backend.device())}
    answers = {(torch.backends.mps, "is_available"): lambda: True, (torch.backends.mps, "is_built"): lambda: True}
    mps = getattr(torch, "mps", None)
    if mps is not None:
        answers.update({(mps, name): fn for name, fn in {
            "current_allocated_memory": allocated, "driver_allocated_memory": allocated, **common}.items()})
    return answers


@contextmanager
def _patched(answers: dict):
    saved = {key: getattr(key[0], key[1], None) for key in answers}
    try:
        for (module, name), fn in answers.items():
            setattr(module, name, fn)
        yield
    finally:
        for (module, name), old in saved.items():
            if old is None:
                delattr(module, name)
            else:
                setattr(module, name, old)


@contextmanager
def _autocast_on(source: str, target: torch.device):
    """``torch.autocast("cuda")`` (and ``torch.cuda.amp.autocast``) autocasts on the scanned device."""
    autocast = torch.amp.autocast_mode.autocast
    original = autocast.__init__

    def __init__(self, device_type, *args, **kwargs):
        if device_type == source:
            device_type = target.type
        original(self, device_type, *args, **kwargs)

    autocast.__init__ = __init__
    try:
        yield
    finally:
        autocast.__init__ = original


@contextmanager
def remapped(source: str, backend):
    """Run a block with ``source`` device requests answered by ``backend``'s device."""
    if source not in SOURCES:
        from dmlprof.errors import UsageError

        raise UsageError(f"--from takes one of {', '.join(SOURCES)}, not {source!r}")
    target = backend.device()
    with ExitStack() as stack:
        stack.enter_context(_patched(_module_answers(source, backend)))
        stack.enter_context(_autocast_on(source, target))
        stack.enter_context(_no_pinning())
        stack.enter_context(_DeviceArguments(source, target))
        yield


@contextmanager
def _no_pinning():
    """Only a CUDA host pins memory; a DataLoader told CUDA is there pins in a thread of its own."""
    torch.Tensor.pin_memory = lambda self, device=None: self  # shadows TensorBase's method
    try:
        yield
    finally:
        del torch.Tensor.pin_memory
