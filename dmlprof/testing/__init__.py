"""An emulated DirectML device for tests and demos (no DirectML hardware needed).

A real PrivateUse1 backend, built as a small C++ extension with
``torch.utils.cpp_extension``: tensors live in host memory, the dispatcher
sees kernels for exactly the op names torch-directml 0.2.5.dev240914
registers (from dmlprof's shipped op table), and every other op reaches a
boxed fallback that warns with torch-directml's exact text (once per process
unless ``torch.set_warn_always(True)``), runs the CPU kernel and counts the
call. The counts are the oracle dmlprof's warning-based live verdicts are
tested against.

    from dmlprof import testing
    testing.load()                     # builds once, cached per torch installation
    x = torch.ones(3).to("privateuseone")
    testing.fallback_counts()          # {"aten::lerp.Scalar_out": 4, ...}

Like most DirectML adapters it refuses float64 (set ``DMLPROF_EMULATED_FLOAT64=1``,
or :func:`set_float64_support`, for one that has it) and, like every one,
bfloat16, with torch-directml's own error messages.

It can also misbehave on purpose, so that ``scan --verify`` is tested against
a known fault: :func:`set_fault` (or ``DMLPROF_EMULATED_FAULT=kind:op`` in the
environment, read when the device loads) corrupts one op's outputs or drops
its in-place write.

    testing.set_fault("corrupt", "aten::addmm")        # adds an error to addmm's result
    testing.set_fault("drop_write", "aten::add_.Tensor")  # add_ leaves its destination unchanged
    testing.clear_fault()
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import platform
import shutil
import sys
import threading
import types
from pathlib import Path
from typing import Optional

import torch

from dmlprof import progress
from dmlprof.directml.failures import AbortNote
from dmlprof.directml.device_module import host_device_module
from dmlprof.testing.building import build_failure, build_lock

EXTENSION_NAME = "dmlprof_emulated_dml"
CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = (CSRC / "emulated_dml.cpp",)
#: overrides where built extensions are cached
BUILD_DIR_ENV = "DMLPROF_TORCH_EXTENSIONS_DIR"
DEVICE_TYPE = "privateuseone"
#: ``kind:op`` (``corrupt:aten::addmm``, ``drop_write:aten::add_.Tensor``): a fault set when the device loads
FAULT_ENV = "DMLPROF_EMULATED_FAULT"
FAULT_KINDS = ("corrupt", "drop_write")
#: ``1``: the device runs float64, as a few DirectML adapters do (read when the device loads; off by default)
FLOAT64_ENV = "DMLPROF_EMULATED_FLOAT64"

_lock = threading.Lock()
_state: dict = {}


class EmulatedDeviceError(RuntimeError):
    """The emulated device could not be built or loaded; ``remedy`` says what to do, where something can be done."""

    def __init__(self, message: str, remedy: str = ""):
        super().__init__(message)
        self.remedy = remedy


#: torch takes one set of PrivateUse1 hooks per process, and a prediction's stand-in device took them first
AFTER_A_PREDICTION_REMEDY = (
    "start a new Python process (in a notebook, restart the kernel) and use the emulated device before any "
    "prediction there, or run the prediction as its own command: dmlprof scan FILE --target dml")


def torch_version_tuple() -> tuple:
    parts = torch.__version__.split("+")[0].split(".")
    return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in parts[:2])


def compile_flags() -> list:
    """The compiler flags the extension is built with (part of its cache key)."""
    major, minor = torch_version_tuple()
    # NDEBUG as libtorch's release builds: debug-only asserts in its headers
    # (RecordFunction::inputs) check state that only debug builds keep.
    if os.name == "nt":
        return [f"/DEMU_TORCH_VERSION={major * 100 + minor}", "/DNDEBUG"]
    return [f"-DEMU_TORCH_VERSION={major * 100 + minor}", "-O1", "-DNDEBUG"]


def build_key() -> str:
    """What a built extension depends on, hashed: its C++ source, the torch installation it links
    against (its path, not only its version: two venvs with one torch version are two builds),
    the Python, the platform and the flags. Each key gets its own cache folder, so installations
    never rebuild over each other nor load each other's kernels."""
    digest = hashlib.sha256()
    for part in (str(Path(torch.__file__).resolve().parent), torch.__version__, sys.version, platform.machine(),
                 " ".join(compile_flags())):
        digest.update(part.encode("utf-8", "replace") + b"\0")
    for source in SOURCES:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def extensions_root() -> Path:
    """Cache folder for this build of the extension (``$DMLPROF_TORCH_EXTENSIONS_DIR`` moves its parent)."""
    parent = os.environ.get(BUILD_DIR_ENV) or Path.home() / ".cache" / "dmlprof" / "torch_extensions"
    tag = f"torch{torch.__version__}-py{sys.version_info[0]}{sys.version_info[1]}-{build_key()}".replace("+", "_")
    return Path(parent) / tag


def build_directory() -> Path:
    return extensions_root() / EXTENSION_NAME


def _compiler() -> Optional[str]:
    if os.name == "nt":
        return shutil.which("cl")
    return os.environ.get("CXX") and shutil.which(os.environ["CXX"]) or shutil.which("c++") or shutil.which("g++")


def build_problem() -> Optional[str]:
    """Why the extension cannot be built or loaded here, or ``None`` when it can."""
    if "torch_directml" in sys.modules and not getattr(sys.modules["torch_directml"], "__dmlprof_stand_in__", False):
        return "torch_directml is imported in this process; both cannot own the privateuseone device"
    if is_loaded():
        return None
    try:
        is_ninja_available = _cpp_extension().is_ninja_available
    except ImportError:
        return "torch.utils.cpp_extension is missing from this torch build"
    if not is_ninja_available():
        return "ninja is not installed (pip install ninja)"
    if _compiler() is None:
        return "no C++ compiler found (install g++ or clang; on Windows run from a Visual Studio developer prompt)"
    return None


def _cpp_extension():
    """torch.utils.cpp_extension, imported without its note on stderr.

    A CUDA build of torch on a machine without CUDA (torch 2.4.1 from PyPI, what
    torch-directml pins) prints "No CUDA runtime is found" on import; the
    emulated device is a CPU build and never needs CUDA.
    """
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        import torch.utils.cpp_extension as cpp_extension
    return cpp_extension


def is_loaded() -> bool:
    return "module" in _state


def _device_module() -> types.ModuleType:
    """What ``torch._register_device_module`` needs for ``.to('privateuseone')``, seeds and AMP.

    Random ops run on the CPU through the fallback, so seeding is the CPU's.
    """
    return host_device_module("dmlprof_emulated_privateuseone", "privateuseone",
                              "emulated DirectML device (host memory)", seeds_cpu=True)


def load(verbose: bool = False):
    """Build (once per build key: source, torch installation, Python, flags; cached) and load the
    emulated device; returns the extension module.

    Idempotent. Raises :class:`EmulatedDeviceError` when it cannot be built here.
    """
    with _lock:
        if is_loaded():
            return _state["module"]
        problem = build_problem()
        if problem:
            raise EmulatedDeviceError(problem)
        load_extension = _cpp_extension().load

        build_dir = build_directory()
        try:
            build_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # $DMLPROF_TORCH_EXTENSIONS_DIR names a file, or a folder we may not write
            raise EmulatedDeviceError(
                f"cannot create the build folder {build_dir}: {exc.strerror or exc} (set {BUILD_DIR_ENV} to a "
                "writable folder)") from None
        try:
            with build_lock(build_dir, waiting=_say_waiting), build_shown(build_dir):
                module = load_extension(
                    name=EXTENSION_NAME,
                    sources=[str(p) for p in SOURCES],
                    extra_cflags=compile_flags(),
                    build_directory=str(build_dir),
                    verbose=verbose,
                )
        except Exception as exc:  # compiler errors arrive as RuntimeError/OSError/CalledProcessError
            raise EmulatedDeviceError(f"building the emulated DML extension failed: {build_failure(exc)}") from exc
        _install(module)
        _state["module"] = module
        _ensure_backward()
        atexit.register(_drain_device_backward_thread_at_exit)
        return module


def _drain_device_backward_thread_at_exit() -> None:
    """Let the device's backward thread drop its last graph task while Python can still take it.

    torch >= 2.6 stashes a Python object in every backward's thread-local state; the device thread that
    ran a backward often drops the graph task (and that object) after the caller has returned, and needs
    the GIL for it. When the program ends first, the thread finds the interpreter finalizing and exits
    mid-destructor: "terminate called without an active exception", SIGABRT, after the program finished
    (3 of 20 processes on a loaded 2-core machine). An exit handler runs one more backward through that
    thread, without the stash (the engine directly): the thread takes the next task only after it
    dropped the last one, and this one holds nothing of Python's. Exit handlers run before finalizing.
    """
    if _state.get("backward_on_calling_thread"):
        return  # the device has no backward thread in this process
    # on a thread of its own: there grad mode is on whatever the program left, and a device thread that
    # is stuck (a hook that never returns) costs the exit a few seconds, not forever
    drain = threading.Thread(target=_one_unstashed_backward, name="dmlprof-drain", daemon=True)
    drain.start()
    drain.join(DRAIN_WAIT_S)


#: how long the exit waits for the device's backward thread to take one more task
DRAIN_WAIT_S = 5.0


def _one_unstashed_backward() -> None:
    try:
        leaf = torch.ones(1, dtype=torch.float32, device=torch.device(DEVICE_TYPE, 0), requires_grad=True)
        out = (leaf * 2).sum()
        # (tensors, grad_tensors, keep_graph, create_graph, inputs, allow_unreachable, accumulate_grad)
        torch.autograd.Variable._execution_engine.run_backward((out,), (torch.ones_like(out),), False, False,
                                                             (), True, True)
    except Exception:  # never turn a finished program's exit into an error
        pass


#: what the progress bar says while the extension compiles (20 s on an idle 2-core machine, 70 s and more on
#: a loaded one): without it the first use of the device is a silent wait
BUILD_PHASE = "building the emulated DirectML device (first use, about 20 s)"


def build_shown(build_dir: Path):
    """A progress phase around the extension's build when it is not built yet (the CLI draws it on a
    terminal, with a running clock; in a CI log it notes one line); nothing when the built library is there
    and loading is quick."""
    suffix = ".pyd" if os.name == "nt" else ".so"
    if (build_dir / f"{EXTENSION_NAME}{suffix}").is_file():
        return contextlib.nullcontext()
    progress.note(f"dmlprof: {BUILD_PHASE} ...")
    return progress.phase(BUILD_PHASE)


def _say_waiting(holder: dict) -> None:
    progress.note(f"dmlprof: waiting for process {holder.get('pid', '?')}, which is building the emulated "
                  "DirectML device (a build that is killed hands over at once)")


def _ensure_backward() -> None:
    """Make backward on the device work in this process, whenever the device was loaded.

    The autograd engine sizes its per-device worker queues at the process's first
    backward; one that ran before the device existed (any CPU backward) left none
    for ``privateuseone``, and a device backward would fail an internal assert.
    Then backward runs on the calling thread (the same ops, no worker thread) for
    the rest of the process, and the state says so.
    """
    try:  # on index 0: a tensor made on "privateuseone" has none, and the engine has no queue for it (as on DirectML)
        (torch.ones(1, device=torch.device(DEVICE_TYPE, 0), requires_grad=True) * 2).sum().backward()
    except RuntimeError as exc:
        if "device_ready_queues_" not in str(exc):
            raise
        torch.autograd.set_multithreading_enabled(False)
        _state["backward_on_calling_thread"] = True


def _failure_rule(name: str, arguments: list):
    """What the device asks before running an op DirectML may refuse: the error to raise, or None.

    The device passes every schema argument in order; the rules read positional ones as ``args``
    and keyword-only ones (``dtype=``, ``out=``) as ``kwargs``, as a Python kernel receives them.
    """
    from dmlprof.directml.failures import failure
    from dmlprof.record.tap import op_overload

    overload = op_overload(name)
    if overload is None:
        return None
    args, kwargs = _as_called(overload, arguments)
    found = failure(name, args, kwargs, DEVICE_TYPE, float64_support())
    return None if found is None else found.error_text()


def _mixed_device_rule(name: str, arguments: list):
    """What the device asks before a call with a CPU tensor beside its own: the error to raise, or None
    (dmlprof.directml.mixed_devices: torch-directml's kernels refuse most such calls; its fallback takes them)."""
    from dmlprof.directml.mixed_devices import mixed_device_failure
    from dmlprof.record.tap import op_overload

    overload = op_overload(name)
    if overload is None:
        return None
    args, kwargs = _as_called(overload, arguments)
    found = mixed_device_failure(name, overload._schema, args, kwargs, DEVICE_TYPE, name in _state["natives"])
    return None if found is None else found.error_text()


def _as_called(overload, arguments: list) -> tuple:
    """A boxed call's arguments (every schema argument, in order) as a Python kernel receives them."""
    args, kwargs = [], {}
    for argument, value in zip(overload._schema.arguments, arguments):
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return tuple(args), kwargs


def _float64_rule(name: str, values: list, outputs: bool) -> bool:
    """Whether an adapter without float64 refuses this call (asked only of a call with a float64 device tensor)."""
    from dmlprof.directml.float64 import refuses_float64

    return refuses_float64(name, values, DEVICE_TYPE, outputs)


def _install(module) -> None:
    from dmlprof.directml.output_dtypes import OUTPUT_IN_INPUT_DTYPE
    from dmlprof.directml.unmarked_writes import UNMARKED_WRITES
    from dmlprof.tables import load_table

    table = load_table("dml")
    module.set_outputs_in_input_dtype(OUTPUT_IN_INPUT_DTYPE)  # read as the kernels are registered: first
    module.set_unmarked_writes({op: list(names) for op, names in UNMARKED_WRITES.items()})
    skipped = module.register_kernels(table.registrations["PrivateUse1"], "PrivateUse1")
    _state["natives"] = frozenset(table.registrations["PrivateUse1"]) - frozenset(skipped)
    # torch-directml also puts reshape on AutogradPrivateUse1 (so autograd does not decompose it)
    # and torchvision::nms (without it, nms on the device has no autograd kernel on torch 2.4.1 and
    # every detection model fails): the same names.
    skipped += module.register_kernels(table.registrations["AutogradPrivateUse1"], "AutogradPrivateUse1")
    _state["skipped"] = sorted(skipped)
    if torch_version_tuple() >= (2, 6):
        # Backward needs the backend name registered and hooks; the name stays
        # "privateuseone", as torch-directml's devices print.
        torch.utils.rename_privateuse1_backend(DEVICE_TYPE)
        try:
            module.register_hooks()
        except RuntimeError as exc:  # torch takes one set of PrivateUse1 hooks per process
            raise EmulatedDeviceError(
                "the emulated DML device must be loaded before a prediction (--target) runs in the same "
                f"process: the prediction's stand-in device holds the PrivateUse1 hooks ({exc})",
                AFTER_A_PREDICTION_REMEDY) from None
    if not hasattr(torch, DEVICE_TYPE):
        torch._register_device_module(DEVICE_TYPE, _device_module())
    module.set_float64_support(float64_from_environment())
    module.set_float64_rule(_float64_rule)
    from dmlprof.directml.failures import ALWAYS_FAILING_COMPOSITES, IMPLICIT_FAILING_COMPOSITES, ruled_ops

    module.set_failure_rules(_failure_rule, sorted(ruled_ops()))
    module.set_mixed_device_rule(_mixed_device_rule)
    # Kernels of this device's own for the composites that fail on every torch-directml tensor (the view
    # scatters read a storage its tensors lack): torch's composite would run on this device's tensors, which
    # have storage. Each call asks the rules first, which refuse it with torch-directml's words.
    module.register_kernels(sorted(ALWAYS_FAILING_COMPOSITES), "PrivateUse1")
    module.register_kernels(sorted(IMPLICIT_FAILING_COMPOSITES), "AutogradPrivateUse1")  # below autograd, to the above
    _state["contiguous"] = _contiguous_as_on_directml()
    from dmlprof.directml.device_module import fakes_as_on_directml

    fakes_as_on_directml(DEVICE_TYPE, emulated=True)  # torch.compile then fails or runs eagerly as on torch-directml
    spec = os.environ.get(FAULT_ENV, "").strip()
    if spec:
        kind, _, op = spec.partition(":")
        _set_fault(module, kind.strip(), op.strip(), where=f"{FAULT_ENV}={spec}")


def _contiguous_as_on_directml():
    """``x.contiguous(memory_format=...)`` as torch-directml's tensors answer it (they say they are contiguous in every
    layout: a contiguous tensor comes back as it is): this device's tensors have strides of their own, so
    without it ``contiguous(memory_format=torch.channels_last)`` would make a channels-last copy, which
    torch-directml refuses. Returns the library that holds the kernel (kept for the life of the process)."""
    from dmlprof.directml.device_module import contiguous_as_on_directml

    library = torch.library.Library("aten", "IMPL")
    library.impl("contiguous", contiguous_as_on_directml, "AutogradPrivateUse1")
    return library


def float64_from_environment() -> bool:
    """Whether ``DMLPROF_EMULATED_FLOAT64`` asks for an adapter with float64 support."""
    return os.environ.get(FLOAT64_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def set_float64_support(on: bool) -> None:
    """Let the device run float64 (``True``) or refuse it as most DirectML adapters do (the default).

    bfloat16 is refused either way: DirectML has no bfloat16.
    """
    load().set_float64_support(bool(on))
    _state["float64"] = bool(on)


def float64_support() -> bool:
    return bool(_state.get("float64", float64_from_environment())) if is_loaded() else float64_from_environment()


def _set_fault(module, kind: str, op: str, where: str = "") -> None:
    if kind not in FAULT_KINDS:
        raise EmulatedDeviceError(f"{where or 'set_fault'}: unknown fault kind {kind!r} (one of {', '.join(FAULT_KINDS)})")
    try:
        module.set_fault(kind, op)
    except RuntimeError as exc:
        raise EmulatedDeviceError(f"{where or 'set_fault'}: {str(exc).splitlines()[0]}") from None
    _state["fault"] = (kind, op)


def set_fault(kind: str, op: str) -> None:
    """Make the device misbehave on ``op`` (``aten::name[.overload]``, as dmlprof records it).

    ``kind`` is ``"corrupt"`` (every call's outputs get an error of at least 1
    and at least their own largest magnitude; booleans flip) or ``"drop_write"``
    (the tensors the call writes in place, ``self`` or ``out=``, keep their old
    contents). One fault at a time; it applies to calls on every thread until
    :func:`clear_fault`.
    """
    _set_fault(load(), kind, op)


def clear_fault() -> None:
    """Back to a well-behaved device."""
    load().set_fault("", "")
    _state.pop("fault", None)


def current_fault() -> Optional[tuple]:
    """``(kind, op)`` of the fault set now, or ``None``."""
    return _state.get("fault") if is_loaded() else None


def fault_hits() -> int:
    """Kernel calls that took the fault since it was set."""
    return int(load().fault_hits())


def skipped_ops() -> list:
    """Table op names the running torch does not define (not registered)."""
    load()
    return list(_state["skipped"])


def real_kernel_ops() -> list:
    """Ops implemented for real rather than by running the CPU kernel."""
    return sorted(load().real_kernel_names())


def fallback_counts() -> dict:
    """Calls per op (``aten::name.overload``) that reached the fallback since the last reset."""
    return dict(load().fallback_counts())


def reset_fallback_counts() -> None:
    load().reset_fallback_counts()


def memory_allocated() -> int:
    """Bytes the device's storages hold now (its allocator counts them; 0 before the device is loaded)."""
    return int(_state["module"].memory_allocated()) if is_loaded() else 0


def max_memory_allocated() -> int:
    """The most bytes the device's storages held since :func:`reset_peak_memory` (or the device's loading)."""
    return int(_state["module"].max_memory_allocated()) if is_loaded() else 0


def reset_peak_memory() -> None:
    """The peak becomes what the device holds now, as ``torch.cuda.reset_peak_memory_stats()`` does CUDA's."""
    if is_loaded():
        _state["module"].reset_peak_memory()


def device() -> torch.device:
    load()
    return torch.device(DEVICE_TYPE, 0)


def take_abort_note() -> Optional[AbortNote]:
    """The aborts the device raised since the last take (by any thread of this process, or a process it forked),
    recorded or not; ``None`` when there were none, or the device is not loaded. Each is taken once."""
    if not is_loaded():
        return None
    count, op, message, pid, thread = _state["module"].take_abort_note()
    return AbortNote(int(count), op, message, int(pid), int(thread)) if count else None


def abort_count() -> int:
    """Every abort the device raised in a call's place in this process and those it forked (never reset)."""
    return int(load().abort_count()) if is_loaded() else 0


#: Where the emulated device calls another op than torch-directml (measured on the real one, docs/realdml.md):
#: its tensors have host storage and torch-directml's have none (an OpaqueTensorImpl), so the autograd engine
#: adds two gradients of one tensor in place here (``add_``) and out of place there (``add``).
ACCUMULATES_IN_PLACE = {"aten::add_.Tensor": "aten::add.Tensor"}


def as_on_directml(op: str, phase: str) -> str:
    """The op torch-directml calls where this device called ``op`` in ``phase`` (the same op, but for
    autograd's gradient accumulation: :data:`ACCUMULATES_IN_PLACE`). A comparison names both sides so:
    ``.grad += g`` (AccumulateGrad) is an ``add_`` on every device, and is renamed alike on each."""
    return ACCUMULATES_IN_PLACE.get(op, op) if phase == "backward" else op


__all__ = [
    "ACCUMULATES_IN_PLACE", "as_on_directml",
    "FLOAT64_ENV", "float64_support", "set_float64_support",
    "EmulatedDeviceError", "FAULT_ENV", "clear_fault", "current_fault", "fault_hits", "set_fault", "build_problem", "build_directory", "device", "fallback_counts", "is_loaded",
    "load", "max_memory_allocated", "memory_allocated", "real_kernel_ops", "reset_peak_memory", "reset_fallback_counts", "skipped_ops", "AbortNote", "abort_count", "take_abort_note",
]
