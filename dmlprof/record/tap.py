"""A tap on the dispatcher: every op call below autograd, handed to Python, without a dispatch mode.

Why not a ``TorchDispatchMode``: while any dispatch mode is active, ATen's
``isTensorSubclassLike()`` is true for every tensor, and composite kernels that
branch on it take their tensor-subclass path. ``F.ctc_loss`` with lengths on the
CPU then raises "Expected all tensors to be on the same device", ``prod``'s
backward calls ``cumprod`` where the unrecorded program does not, attention's
masked ``add_`` becomes ``add``. A recorder must not change what it records.

The tap is a Python kernel on ``Fake``, a functionality key that sits below
autograd and above the backends, that no tensor carries and that torch itself
leaves empty (torch 2.4 to 2.13 have no kernel or fallback there). While
recording, the key is in the thread-local include set; the autograd engine
carries that set to its worker threads with the rest of the thread-local
state. Each call reaches :meth:`DispatcherTap` 's handler, which runs the op
again with the key excluded (what a dispatch mode does with its own key), so
nested calls of a composite kernel reach the backend unseen, as before.

Each op gets its own Python kernel (registered once a process), a fallthrough covers ops defined later, and
:meth:`DispatcherTap.refresh` adds kernels for them. Torch >= 2.5 could register
one Python fallback for every op (``Library.fallback``), but torch hands a call
with a tensor subclass argument (Dynamo's fake tensors in ``torch.compile``) to
a trampoline that knows ``Library.impl`` kernels only, and asserts for a
fallback (``func != nullptr``, python_dispatch.cpp): every compiled model
failed. Calls of such tracing compute nothing on a device and pass the tap
unrecorded (:func:`_per_op_kernel`).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable

import torch

#: the dispatch key the tap lives on (see the module docstring)
TAP_KEY_NAME = "Fake"
#: Ops the tap lets through unseen. ``nn.Parameter(t)`` and ``t.as_subclass(cls)`` give the tensor
#: these return a Python object of their own class; one that passed through a Python handler has one
#: already, and torch refuses the second ("already associated to a python object"). Both only make
#: an alias of a tensor, on any device: nothing to report.
UNSEEN_OPS = frozenset({"aten::alias", "aten::detach"})


def tap_key():
    return torch._C._parse_dispatch_key(TAP_KEY_NAME)


class TapUnavailable(RuntimeError):
    """This torch has no free dispatch key for the tap."""


def op_overload(name: str):
    """The OpOverload for ``ns::op[.overload]``, or ``None`` when Python cannot reach it."""
    namespace, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")
    except (AttributeError, RuntimeError):
        return None


class PerOpKernels:
    """Python kernels for every op of a dispatch key (``Library.fallback`` asserts for tensor subclasses).

    ``make(overload)`` builds the kernel for one op; ``wanted(name)`` says which
    ops get one (all, by default). Ops defined after :meth:`install` (an extension
    imported later) are covered by :meth:`refresh`.
    """

    def __init__(self, key_name: str, make: Callable, wanted: Callable[[str], bool] = lambda name: True):
        self.key_name = key_name
        self.make = make
        self.wanted = wanted
        self._libraries: dict = {}
        self._seen: set = set()

    def install(self) -> None:
        self.refresh()

    def refresh(self) -> int:
        """Register kernels for ops defined since the last call; returns how many."""
        names = torch._C._dispatch_get_all_op_names()
        if len(names) == len(self._seen):
            return 0
        added = 0
        for name in names:
            if name in self._seen:
                continue
            self._seen.add(name)
            if not self.wanted(name):
                continue
            overload = op_overload(name)
            if overload is None:
                continue
            namespace = name.partition("::")[0]
            library = self._libraries.get(namespace)
            if library is None:
                library = self._libraries[namespace] = torch.library.Library(namespace, "IMPL")
            try:
                library.impl(overload, self.make(overload), self.key_name, with_keyset=True)
            except RuntimeError:
                continue  # an op this torch will not let Python implement (none known); it stays unseen
            added += 1
        return added

    def remove(self) -> None:
        for library in self._libraries.values():
            library._destroy()
        self._libraries.clear()
        self._seen.clear()


class DispatcherTap:
    """Calls ``handler(op, args, kwargs)`` for every op call on this thread (and autograd's) while enabled.

    The handler must run the op itself with :meth:`call` and return its result.
    One tap exists per process at a time (the key has room for one kernel).
    """

    _lock = threading.Lock()
    _installed: "DispatcherTap | None" = None

    def __init__(self, handler: Callable):
        self.handler = handler
        self.key = tap_key()
        self.keyset = torch._C.DispatchKeySet(self.key)

    # -- registration --------------------------------------------------------
    def install(self) -> "DispatcherTap":
        with DispatcherTap._lock:
            if DispatcherTap._installed is not None:
                raise TapUnavailable("another dmlprof recording is active in this process")
            _register_process_kernels(self.key)
            DispatcherTap._installed = self
        return self

    def refresh(self) -> int:
        """Cover ops defined since install; returns how many were added."""
        return _process_kernels.refresh() if _process_kernels is not None else 0

    def remove(self) -> None:
        with DispatcherTap._lock:
            if DispatcherTap._installed is self:
                DispatcherTap._installed = None

    # -- use ---------------------------------------------------------------------
    @contextmanager
    def enabled(self):
        """Calls on this thread (and on autograd's threads for backward started here) reach the handler."""
        with torch._C._IncludeDispatchKeyGuard(self.key):
            yield

    @contextmanager
    def paused(self):
        """Calls reach the kernels without the handler (the handler's own work, dmlprof's own syncs)."""
        with torch._C._ExcludeDispatchKeyGuard(self.keyset):
            yield

    def call(self, op, args, kwargs):
        """Run ``op`` below the tap: its nested calls are not seen."""
        with torch._C._ExcludeDispatchKeyGuard(self.keyset):
            return call_as_dispatched(op, args, kwargs)


# -- the tap's kernels: registered once a process --------------------------------------------------------------
# Registering a Python kernel for each of torch's ~3,000 ops takes 50-70 ms (torch 2.13), and a process that records
# many times (the transparency tool records each truth sample anew) paid it each time. The kernels stay registered
# once made: they are reached only while a recording puts the tap's key in the thread's include set, and with no
# tap installed they hand each call on to the kernels below, untouched.
_process_fallthrough = None
_process_kernels: "PerOpKernels | None" = None


def _register_process_kernels(key) -> None:
    global _process_fallthrough, _process_kernels
    if _process_kernels is None:
        if torch._C._dispatch_has_backend_fallback(key):
            raise TapUnavailable(f"the {TAP_KEY_NAME} dispatch key is taken in this torch")
        _process_fallthrough = torch.library.Library("_", "IMPL")
        _process_fallthrough.m.fallback_fallthrough(TAP_KEY_NAME)
        _process_kernels = PerOpKernels(TAP_KEY_NAME, _per_op_kernel, wanted=lambda name: name not in UNSEEN_OPS)
    _process_kernels.refresh()


# -- running an op from Python as the dispatcher would have -------------------------------------------
_written_returns: dict = {}


def _returned_writes(func) -> tuple:
    """For an in-place or ``out=`` op: ``(return index, argument position or keyword)`` of each tensor it
    writes and returns (``masked_fill_`` returns ``self``); ``()`` for any other op. Read once per op."""
    found = _written_returns.get(func)
    if found is None:
        found = []
        try:
            schema = func._schema
            arguments = list(schema.arguments)
            for index, returned in enumerate(schema.returns):
                alias = returned.alias_info
                if alias is None or not alias.is_write:
                    continue
                for position, argument in enumerate(arguments):
                    if argument.alias_info is not None and argument.alias_info.before_set == alias.before_set:
                        found.append((index, argument.name if argument.kwarg_only else position))
                        break
        except (AttributeError, RuntimeError):
            pass
        found = _written_returns[func] = tuple(found)
    return found


def _argument(args, kwargs, where):
    if isinstance(where, str):
        return kwargs.get(where)
    return args[where] if where < len(args) else None


def call_as_dispatched(func, args, kwargs):
    """Run ``func`` from Python, leaving its tensors as a direct call would.

    A kernel may write an in-place or ``out=`` result into a tensor of its own and hand the caller's
    handle that tensor (torch-directml's ``masked_fill_`` does): called directly, the caller's tensor
    then holds the result. Called from a Python kernel, the handle it changed is a copy, and the
    dispatcher returns the caller's own tensor, unwritten: the write is lost (measured on real
    DirectML: under the tap, ``masked_fill_`` filled nothing and a causal attention was not causal).
    Where the returned tensor is not the argument it should be, the argument takes the result's data
    as the direct call's handle did (``set_data``: the same tensor object now holds the result; its
    older views do not, as after the direct call).
    """
    out = func(*args, **kwargs)
    writes = _returned_writes(func)
    if writes:
        results = out if isinstance(out, (tuple, list)) else (out,)
        for index, where in writes:
            target = _argument(args, kwargs, where)
            result = results[index] if index < len(results) else None
            if isinstance(target, torch.Tensor) and isinstance(result, torch.Tensor) and result is not target:
                with torch.no_grad():
                    target.data = result
    return out


_META, _PYTHON = torch._C.DispatchKey.Meta, torch._C.DispatchKey.Python
#: Dynamo's frame hook, turned off while the handler runs: inside a compiled call it took the recorder's own
#: frames for the user's and traced them ("RuntimeError when making fake tensor call")
_set_eval_frame = getattr(getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None), "set_eval_frame", None)


def _makes_meta(kwargs) -> bool:
    """Whether a call's ``device`` argument is the meta device (the dispatcher hands it over as a torch.device)."""
    device = kwargs.get("device")
    return device is not None and getattr(device, "type", None) == "meta"


def _per_op_kernel(overload):
    """The tap's kernel for one op: the installed tap's handler, or (tracing, or no tap installed) the kernels below."""
    tap = torch._C.DispatchKeySet(tap_key())

    def kernel(keyset, *args, **kwargs):
        installed = DispatcherTap._installed
        if (installed is None or keyset.has(_META) or keyset.has(_PYTHON) or torch._C._len_torch_dispatch_stack()
                or (kwargs and _makes_meta(kwargs))):
            # tracing (Dynamo's fake tensors, on the meta device or not yet through their own dispatch; a mode on
            # the stack), or a meta tensor made (a shape probe under torch.device("meta"): a factory call or a
            # copy to "meta" carries the device in its arguments, not yet in its keyset): it computes nothing on
            # a device, and a subclass's own dispatch makes the calls that do; on to the kernels below the tap,
            # unrecorded
            with torch._C._ExcludeDispatchKeyGuard(tap):
                return overload(*args, **kwargs)
        if _set_eval_frame is None:
            return installed.handler(overload, args, kwargs)
        hook = _set_eval_frame(None)
        try:
            return installed.handler(overload, args, kwargs)
        finally:
            _set_eval_frame(hook)
    return kernel
