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
do, is skipped (it changes where a batch waits, not what is computed). CUDA
generators, device contexts, NVTX ranges and ``nn.DataParallel``'s scatter
are answered for the one scanned device, and the legacy typed tensors of older
scripts (``torch.cuda.FloatTensor(n, 1)``, ``x.type(torch.cuda.FloatTensor)``)
are the scanned device's of that dtype; what is left to torch (events,
streams) fails in a line that says ``--from`` does not map it
(:func:`unmapped_note`).

The threads the script starts while it runs (a prefetcher, a thread pool's workers, an evaluator) each enter the
same mapping, as the script's main thread has it: a ``TorchFunctionMode`` is thread-local.

All of it is undone when the script ends (a thread of the script's that outlives it maps no more).
"""
from __future__ import annotations

import importlib
import re
import sys
import threading
import types
from contextlib import ExitStack, contextmanager

import torch
from torch.overrides import TorchFunctionMode

from dmlprof.backends import host_memory

SOURCES = ("cuda", "mps")


def names_device_type(value, device_type: str) -> bool:
    """Whether ``value`` is a device argument of that type (``"cuda"``, ``"cuda:1"``, ``torch.device("cuda")``)."""
    if isinstance(value, torch.device):
        return value.type == device_type
    if isinstance(value, str):
        return value.split(":", 1)[0] == device_type
    return False


def device_arguments_mapped(args: tuple, kwargs: dict, device_type: str, to: torch.device):
    """``(args, kwargs)`` with each device argument of ``device_type`` made ``to``; None where there is none."""
    if not any(names_device_type(a, device_type) for a in args) and \
            not any(names_device_type(v, device_type) for v in kwargs.values()):
        return None
    return (tuple(to if names_device_type(a, device_type) else a for a in args),
            {k: to if names_device_type(v, device_type) else v for k, v in kwargs.items()})


class _Requests:
    """Whether the script has asked for the source device yet: what ``torch.cuda.is_initialized()`` answers (CUDA
    initialises at a script's first CUDA tensor)."""

    made = False
    ended = False  # the script has ended: a thread of its that outlives it maps no more


class _DeviceArguments(TorchFunctionMode):
    """Device arguments naming ``source`` become ``target``; ``Tensor.type`` of a legacy typed tensor of ``source``
    (``x.type(torch.cuda.FloatTensor)``) converts to the target's tensor of its dtype."""

    def __init__(self, source: str, target: torch.device, requests: _Requests, legacy_types: dict):
        super().__init__()
        self.source, self.target = source, target
        self.requests, self.legacy_types = requests, legacy_types
        self._to_source = getattr(torch.Tensor, source, None)  # Tensor.cuda
        # Tensor.is_cuda's descriptor: the mode is handed its __get__, a method-wrapper made anew at each access
        # (so never ``is`` one kept here), whose __self__ is the one descriptor
        self._is_source = getattr(torch.Tensor, f"is_{source}")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.requests.ended:
            return func(*args, **kwargs)
        if func is torch.device and names_device_type(args[0] if args else kwargs.get("type"), self.source):
            return self.target  # torch.device("cuda", 0): the type and index of the one scanned device
        if func is self._to_source and func is not None:
            self.requests.made = True
            non_blocking = kwargs.get("non_blocking", False)
            return args[0].to(self.target, non_blocking=non_blocking)
        if getattr(func, "__self__", None) is self._is_source:
            return args[0].device.type == self.target.type
        if func is torch.Tensor.type:
            return self._tensor_type(*args, **kwargs)
        if kwargs.get("pin_memory"):  # torch.empty(..., pin_memory=True): only a CUDA host pins memory
            kwargs = {**kwargs, "pin_memory": False}
        mapped = device_arguments_mapped(args, kwargs, self.source, self.target)
        if mapped is not None:
            self.requests.made = True
            args, kwargs = mapped
        return func(*args, **kwargs)

    def _tensor_type(self, tensor, dtype=None, non_blocking=False, **kwargs):
        """``x.type()`` and ``x.type(T)``, where ``T`` may be a legacy type of the source (the class or its name)."""
        if dtype is None:
            name = torch._C.TensorBase.type(tensor)  # "torch.privateuseone.FloatTensor"
            if tensor.device.type == self.target.type and self.target.type != "cpu":
                # what the script's CUDA tensor answers; on the CPU as the scanned device, the script's own CPU
                # tensors are there too, so the CPU's name stays
                return f"torch.{self.source}.{name.rsplit('.', 1)[-1]}"
            return name
        wanted = self.legacy_types.get(dtype.rsplit(".", 1)[-1]) if isinstance(dtype, str) and \
            dtype.startswith(f"torch.{self.source}.") else dtype
        if wanted in self.legacy_types.values():
            self.requests.made = True
            return tensor.to(self.target, dtype=wanted.dtype, non_blocking=non_blocking or kwargs.get("async", False))
        return torch._C.TensorBase.type(tensor, dtype, non_blocking, **kwargs)


#: torch.cuda's legacy typed tensors, each the scanned device's tensor of the dtype its name says (the CPU's class of
#: the same name, ``torch.FloatTensor``, builds one from data)
_LEGACY_TYPES = ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
                "CharTensor", "ByteTensor", "BoolTensor")


def _legacy_types(source: str, target: torch.device, requests: _Requests) -> dict:
    """name -> a stand-in for ``torch.<source>.<name>``, for those this torch has."""
    module = getattr(torch, source, None)
    return {name: _legacy_type(source, name, getattr(module, name).dtype, target, requests)
            for name in _LEGACY_TYPES if hasattr(module, name) and hasattr(torch, name)}


def _are_sizes(args) -> bool:
    """``FloatTensor(2, 3)`` or ``FloatTensor(torch.Size(...))``: sizes of an uninitialised tensor (a tuple or list
    is data, as for torch's legacy constructors)."""
    if len(args) == 1 and isinstance(args[0], torch.Size):
        return True
    return all(isinstance(a, int) and not isinstance(a, bool) for a in args)


def _legacy_type(source: str, name: str, dtype: torch.dtype, target: torch.device, requests: _Requests) -> type:
    """``torch.cuda.FloatTensor`` as the scanned device's float tensors: called, it makes one (sizes: uninitialised,
    as torch's legacy constructor; data: copied there); ``isinstance`` holds for the scanned device's tensors of its
    dtype, as ``is_cuda`` does."""
    class _LegacyType(type):
        def __instancecheck__(cls, instance):
            return isinstance(instance, torch.Tensor) and instance.dtype == dtype and instance.device.type == target.type

        def __repr__(cls):
            return f"<class 'torch.{source}.{name}'>"

    def __new__(cls, *args, **kwargs):
        requests.made = True
        kwargs.pop("device", None)  # the one device
        if _are_sizes(args) and not kwargs:
            sizes = args[0] if len(args) == 1 and isinstance(args[0], torch.Size) else args
            return torch.empty(tuple(sizes) or (0,), dtype=dtype, device=target)
        return getattr(torch, name)(*args, **kwargs).to(target)

    return _LegacyType(name, (), {"__new__": __new__, "__module__": f"torch.{source}", "dtype": dtype, "is_cuda": True,
                                  "is_sparse": False})


def _default_tensor_type(legacy_types: dict, source: str):
    """``torch.set_default_tensor_type(torch.cuda.FloatTensor)`` is not mapped (it would set a default device that
    outlives the script): torch's own refusal is raised, in its words, which :func:`unmapped_note` names."""
    original = torch.set_default_tensor_type
    spelled = {f"torch.{source}.{name}": name for name in legacy_types}

    def set_default_tensor_type(t):
        name = spelled.get(t) if isinstance(t, str) else next((n for n, cls in legacy_types.items() if cls is t), None)
        if name is not None:
            raise TypeError(f"type torch.{source}.{name} not available. Torch not compiled with CUDA enabled.")
        return original(t)

    return set_default_tensor_type


def _is_initialized(requests: _Requests):
    """``torch.cuda.is_initialized()``: True once the script has asked for CUDA. torch.cuda's own lazy
    initialisation asks the same function; it keeps torch's answer (no CUDA here), so that what the remap leaves to
    torch still fails where torch fails it."""
    original = torch.cuda.is_initialized

    def is_initialized():
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "torch.cuda" or caller.startswith("torch.cuda."):
            return original()
        return requests.made

    return is_initialized


def _properties(backend):
    total, _ = _total_and_free_bytes(backend)
    # gcnArchName: what torch._inductor's cache key reads for the device's name on a torch built without CUDA
    return types.SimpleNamespace(name=backend.device_name(), total_memory=total, major=0, minor=0,
                                 multi_processor_count=1, gcnArchName=backend.device_name())


def _total_and_free_bytes(backend) -> tuple:
    """(total, free) as ``torch.cuda.mem_get_info()`` answers, read from the device; for a device of host memory (the
    CPU, the emulated DirectML device: its tensors are the host's) the host's, where a CUDA card's own would say 0
    and a script dividing by it, or sizing its batch by it, would fail or shrink."""
    reading = backend.memory()
    total = reading.total_bytes
    if backend.memory_is_host:
        total = total or host_memory.total_physical_memory_bytes()
        free = host_memory.available_physical_memory_bytes()
    else:
        free = max(total - (reading.allocated_bytes or 0), 0) if total else None
    return int(total or 0), int(free or 0)


class _MemoryFigures:
    """What ``torch.cuda.memory_allocated()`` and ``max_memory_allocated()`` answer, and what resets the peak.

    Where the device counts its tensors' bytes (CUDA's allocator, the emulated DirectML device's, XPU's, MPS's,
    torch-directml's ``gpu_memory``), its count and peak: CUDA's arithmetic. The CPU counts none, and the process's
    resident memory is no stand-in (re-probe 17, 17): it only grows, with Python's, torch's and dmlprof's own
    memory, so a script's leak check failed on a loop that holds nothing more (17 MB over 20 steps), and a reset
    reset nothing. There the figure is the process's resident memory when the script began, held: the right scale
    for a share of the card, and a steady loop's growth is 0 as on CUDA, but ``del`` frees nothing and a real leak
    grows nothing either (docs/scripts.md)."""

    def __init__(self, backend):
        self.backend = backend
        self.uncounted = backend.memory_is_host and backend.memory().allocated_bytes is None
        self.held = (host_memory.resident_bytes() or 0) if self.uncounted else 0

    def allocated(self) -> int:
        if self.uncounted:
            return int(self.held)
        return int(self.backend.memory().allocated_bytes or 0)

    def peak(self) -> int:
        """The device's peak, never below what it holds now."""
        if self.uncounted:
            return int(self.held)
        return max(int(self.backend.memory().peak_bytes or 0), self.allocated())

    def reset_peak(self, device=None) -> None:
        self.backend.reset_peak_memory()


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


def _names_the_device(device, target: torch.device) -> bool:
    """A CUDA device argument (``"cuda"``, ``"cuda:0"``), or the scanned device it is mapped to already (the
    mode answers ``torch.device("cuda")`` with it)."""
    return names_device_type(device, "cuda") or (isinstance(device, torch.device) and device.type == target.type)


def _device_index(target: torch.device):
    """torch.cuda's device-index check, taking the scanned device for CUDA device 0: with every CUDA device argument
    mapped, ``torch.device("cuda")`` is the scanned device, which the check refused ("Expected a cuda device"). torch.load
    validates its ``map_location`` through it (``map_location="cuda"``, a resume script's ``map_location=device``)."""
    check = torch.cuda._utils._get_device_index  # taken now: the answer replaces it

    def _get_device_index(device, optional=False, allow_cpu=False):
        if _names_the_device(device, target):
            return 0  # the one device, as device_count() answers
        return check(device, optional, allow_cpu)

    return _get_device_index


def _generator_class(target: torch.device):
    """``torch.Generator`` whose ``device="cuda"`` is a generator of the kind the scanned device's random calls draw
    from: the device's own where torch builds one (XPU, MPS), else what dmlprof's own device makes for its type
    (:mod:`dmlprof.directml.generators`: the CPU's, as torch-directml's is). Every generator is still an instance
    of it (``isinstance(g, torch.Generator)``), and what it makes is torch's own class."""
    from dmlprof.directml.generators import generator_class, made_by_open_blocks

    mapped = target if target.type in ("xpu", "mps") else torch.device("cpu")

    def make_for(device):
        if not _names_the_device(device, target):
            return None
        made = made_by_open_blocks(target)
        return torch._C.Generator(device=mapped) if made is None else made

    return generator_class(make_for)


def _one_device_scatter(target: torch.device):
    """``nn.DataParallel``'s scatter onto the one device ``device_count()`` answers: the inputs moved there, whole (one
    chunk), as CUDA's scatter does for one device; torch's scatter is CUDA's own (``torch._C._scatter``)."""
    from torch.utils._pytree import tree_map

    def on_device(value):
        return value.to(target) if isinstance(value, torch.Tensor) else value

    def scatter(self, inputs, kwargs, device_ids):
        return (tree_map(on_device, tuple(inputs)),), (tree_map(on_device, dict(kwargs or {})),)

    return scatter


def _memory_answers(backend, figures: _MemoryFigures) -> dict:
    """``memory_stats()`` with the keys scripts read (CUDA's allocator's names), and a ``memory_summary()`` made of
    them: torch's own summary reads keys only CUDA's allocator fills."""
    def memory_stats(device=None):
        current, peak = figures.allocated(), figures.peak()
        return {f"{kind}_bytes.all.{which}": value for kind in ("allocated", "reserved", "active")
                for which, value in (("current", current), ("peak", peak))}

    def memory_summary(device=None, abbreviated=False):
        stats = memory_stats()
        return (f"{backend.device_name()} (dmlprof --from cuda: the scanned device's readings)\n"
                f"allocated: {stats['allocated_bytes.all.current']} bytes, peak {stats['allocated_bytes.all.peak']} bytes")

    return {"memory_stats": memory_stats, "memory_summary": memory_summary}


def _memory_fraction() -> dict:
    """``set_per_process_memory_fraction(0.5)``, a shared-GPU script's first line: it caps CUDA's caching allocator,
    which the scanned device has none of, and changes nothing computed; so it is checked as torch checks it and kept,
    for ``get_per_process_memory_fraction()`` to answer, but caps nothing (the scan does not fail at the cap where
    CUDA would)."""
    fraction = [1.0]

    def set_per_process_memory_fraction(value, device=None):
        if not isinstance(value, float):
            raise TypeError("Invalid type for fraction argument, must be `float`")
        if value < 0 or value > 1:
            raise ValueError(f"Invalid fraction value: {value}. Allowed range: 0~1")
        fraction[0] = value

    return {"set_per_process_memory_fraction": set_per_process_memory_fraction,
            "get_per_process_memory_fraction": lambda device=None: fraction[0]}


def _nvtx_answers() -> dict:
    """NVTX ranges (profiler annotations for NVIDIA's tools): nothing to annotate here; the depths are as NVTX counts."""
    depth = [0]

    def range_push(msg):
        depth[0] += 1
        return depth[0] - 1

    def range_pop():
        depth[0] = max(depth[0] - 1, 0)
        return depth[0]

    nvtx = torch.cuda.nvtx
    return {(nvtx, "range_push"): range_push, (nvtx, "range_pop"): range_pop, (nvtx, "mark"): lambda msg: None,
            (nvtx, "range_start"): lambda msg: 0, (nvtx, "range_end"): lambda range_id: None}


def _module_answers(source: str, backend, requests: _Requests, legacy_types: dict) -> dict:
    """(module, attribute) -> the stand-in for the source device's queries."""
    figures = _MemoryFigures(backend)

    def allocated(device=None):
        return figures.allocated()

    def peak(device=None):
        return figures.peak()

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
            "reset_peak_memory_stats": figures.reset_peak,
            "reset_max_memory_allocated": figures.reset_peak,
            "mem_get_info": lambda device=None: _total_and_free_bytes(backend)[::-1],  # (free, total)
            "get_rng_state_all": lambda: [get_rng_state()],  # one device, as device_count() answers
            "set_rng_state_all": lambda states: set_rng_state(states[0]),
            # the rest of torch.cuda.random's API (tests/unit/test_remap_compiled.py holds every name of it answered)
            "seed_all": lambda: None,
            "initial_seed": lambda: initial_seed(),
            # `with torch.cuda.device(i):` / `device_of(t)` switch to the one device: the previous is it too
            "_exchange_device": lambda device: -1 if device < 0 else 0,
            "_maybe_exchange_device": lambda device: -1 if device < 0 else 0,
            "is_initialized": _is_initialized(requests),
            "init": lambda: setattr(requests, "made", True),
            **legacy_types,  # torch.cuda.FloatTensor, ...
            **_memory_answers(backend, figures),
            **_memory_fraction(),
            **common,
        }
        target = backend.device()
        # (torch.nn.parallel.data_parallel is the function of that name: the module is imported by its path)
        return {**{(torch.cuda, name): fn for name, fn in answers.items()}, **_nvtx_answers(),
                (torch.cuda._utils, "_get_device_index"): _device_index(target),
                (torch, "Generator"): _generator_class(target),
                (torch, "set_default_tensor_type"): _default_tensor_type(legacy_types, source),
                (torch.nn.DataParallel, "scatter"): _one_device_scatter(target),
                # its check that the devices are alike divides by their memory, which a device of host memory (the
                # emulated one) does not report: one device is alike itself
                (importlib.import_module("torch.nn.parallel.data_parallel"), "_check_balance"): lambda device_ids: None}
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
    from dmlprof.backends import safetensors_device
    from dmlprof.directml import no_storage
    from dmlprof.directml.failures import DirectMLSemantics

    target = backend.device()
    requests = _Requests()
    legacy_types = _legacy_types(source, target, requests) if source == "cuda" else {}
    with ExitStack() as stack:
        stack.enter_context(_patched(_module_answers(source, backend, requests, legacy_types)))
        stack.enter_context(no_storage.also_named(source))  # map_location="cuda" loads onto the device
        if isinstance(backend, DirectMLSemantics):  # load_file(path, device="cuda") fails there as on DirectML
            stack.enter_context(safetensors_device.refused_for(source, target))
        stack.enter_context(_autocast_on(source, target))
        stack.enter_context(_no_pinning())
        def device_arguments():
            return _DeviceArguments(source, target, requests, legacy_types)

        stack.callback(setattr, requests, "ended", True)
        stack.enter_context(_in_new_threads(device_arguments))
        stack.enter_context(overrides_test_ignores(_DeviceArguments))
        stack.enter_context(device_arguments())
        yield


@contextmanager
def overrides_test_ignores(mode_class: type):
    """For the block, ``torch.overrides.has_torch_function`` answers as without a mode of ``mode_class`` on top of
    the thread's stack. Any mode makes it True, and torch's Python then takes its slow paths (the transformer
    encoder layer's and multi-head attention's fast paths: "some Tensor argument has_torch_function"), where the
    device scanned or predicted takes the fast one (torch-directml's PrivateUse1 device, XPU): a mode dmlprof
    adds to answer device requests must not change which ops the model runs."""
    original = torch.overrides.has_torch_function

    def answered_without_the_mode(args) -> bool:
        depth = torch._C._len_torch_function_stack()
        if not depth or not isinstance(torch._C._get_function_stack_at(depth - 1), mode_class):
            return original(args)
        popped = torch._C._pop_torch_function_stack()
        try:
            return original(args)
        finally:
            torch._C._push_on_torch_function_stack(popped)

    torch.overrides.has_torch_function = answered_without_the_mode
    try:
        yield
    finally:
        torch.overrides.has_torch_function = original


@contextmanager
def _in_new_threads(make_mode):
    """Every thread started in the block runs in a mode of its own from ``make_mode`` (a mode's state is the thread's:
    one instance is not pushed on two threads' stacks). ``Thread._bootstrap_inner`` is what every thread runs, a
    subclass's own ``run`` and a thread pool's workers too; threads running before the block are left as they are."""
    bootstrap = getattr(threading.Thread, "_bootstrap_inner", None)
    if bootstrap is None:  # not this Python's threading: the main thread alone is mapped, as before
        yield
        return

    def _bootstrap_inner(self):
        with make_mode():
            bootstrap(self)

    threading.Thread._bootstrap_inner = _bootstrap_inner
    try:
        yield
    finally:
        threading.Thread._bootstrap_inner = bootstrap


@contextmanager
def _no_pinning():
    """Only a CUDA host pins memory; a DataLoader told CUDA is there pins in a thread of its own."""
    torch.Tensor.pin_memory = _pinned_as_by_the_host  # shadows TensorBase's method
    try:
        yield
    finally:
        del torch.Tensor.pin_memory


def _pinned_as_by_the_host(self, device=None):
    """A CPU tensor as pinned (skipped); a device tensor refused as torch refuses it on CUDA and torch-directml
    (measured on realdml: "cannot pin 'privateuseoneFloatType' only dense CPU tensors can be pinned"; re-probe 22,
    case 10), where the skip had handed it back."""
    if self.device.type != "cpu":
        kind = self.type().rpartition(".")[2][:-len("Tensor")] or str(self.dtype)  # torch.privateuseone.FloatTensor
        raise RuntimeError(f"cannot pin '{self.device.type}{kind}Type' only dense CPU tensors can be pinned")
    return self


#: torch's words for "this build (or machine) has no CUDA", from its C++ as from its Python
_NO_SOURCE_HERE = {"cuda": re.compile(r"Torch not compiled with CUDA enabled|Cannot initialize CUDA without ATen_cuda"
                                      r"|Found no NVIDIA driver on your system")}


def unmapped_note(exc: BaseException, source: str):
    """Where a script under ``--from source`` failed inside ``torch.<source>`` itself (an event, a stream: what the
    remap leaves to torch, which has no such device here), a remedy naming what the script called there, so the one
    line does not read as the script's own error; where torch's C++ refused for want of the device (a use of it the
    remap does not see), a remedy saying so, not the advice to pass ``--from`` already given; None for any other
    failure (one raised deeper, by an op, is not torch.cuda's own even where a torch.cuda frame called it)."""
    if source == "cuda" and _refused_by_lightning(exc):
        return ("--from cuda does not carry Lightning's GPU accelerator: it checks that its device is CUDA's own, "
                "which the scanned device is not; scan the LightningModule's step as a model file (build_model, "
                "make_batch: docs/model_contract.md)")
    package = f"torch.{source}"
    no_source_here = _NO_SOURCE_HERE.get(source)
    if no_source_here is not None and no_source_here.search(str(exc)) and _innermost_package(exc) != package:
        return (f"--from {source} does not map this use of {source}: torch ran it as its own, which has no "
                f"{source} device here (docs/scripts.md lists what --from {source} answers)")

    def in_package(frame) -> bool:
        module = frame.f_globals.get("__name__", "")
        return module == package or module.startswith(package + ".")

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    # the innermost frame, past torch's stand-in classes for what a build lacks (torch._utils' dummy types raise
    # "Tried to instantiate dummy base class Event")
    raised = [frame for frame in frames if frame.f_globals.get("__name__") != "torch._utils"]
    if not raised or not in_package(raised[-1]):
        return None
    entered = next(frame for frame in frames if in_package(frame))  # the script's call into torch.cuda
    name = _called_name(entered)
    public = getattr(getattr(torch, source, None), name.split(".")[0], None)  # torch.cuda.Event, re-exported
    module = entered.f_globals["__name__"]
    shown = package if public is not None and public is entered.f_globals.get(name.split(".")[0]) else module
    return (f"--from {source} does not map {shown}.{name}: it runs as torch's own, which has no "
            f"{source} device here (docs/scripts.md lists what --from {source} answers)")


#: Lightning's packages (the unified one, and the older names): its CUDA accelerator, picked because
#: ``torch.cuda.is_available()`` answers True, refuses a device that is not ``cuda`` ("Device should be GPU, got
#: privateuseone:0 instead")
_LIGHTNING = ("lightning", "pytorch_lightning", "lightning_fabric")
_NAMES_A_DEVICE = re.compile(r"GPU|CUDA|cuda|privateuseone|got cpu")


def _refused_by_lightning(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside Lightning, about the device it was given."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    return module.split(".")[0] in _LIGHTNING and bool(_NAMES_A_DEVICE.search(str(exc)))


def _innermost_package(exc: BaseException) -> str:
    """``torch.cuda`` where the innermost frame of ``exc``'s traceback is torch.cuda's (a submodule's too), else its
    module's name."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    return ".".join(module.split(".")[:2]) if module.startswith("torch.") else module


def _called_name(frame) -> str:
    """What the script called, read from the frame it entered: ``Event`` for ``Event.__new__``, ``Event.record``."""
    code = frame.f_code
    qualname = getattr(code, "co_qualname", None)  # Python 3.11+
    if qualname is None:
        owner = frame.f_locals.get("cls") or (type(frame.f_locals["self"]) if "self" in frame.f_locals else None)
        qualname = f"{owner.__name__}.{code.co_name}" if isinstance(owner, type) else code.co_name
    parts = qualname.split(".")
    return parts[0] if len(parts) > 1 and parts[-1] in ("__new__", "__init__") else qualname
