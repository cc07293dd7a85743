"""The writes into views made in threads the recorder does not record (re-probe 17, case 6).

The recorder records the thread it runs on (and autograd's threads in that thread's backward): its tap's key is
in that thread's include set alone. A write into a view past its base's start made in another thread (a threaded
forward: a hand-rolled data-parallel, a pipeline stage) and backpropagated by the main thread trains on a wrong
gradient on DirectML all the same, and went unjudged: ``check`` passed. So every thread started while a recording
is on gets a second key in its include set, whose Python kernels exist only for the in-place overloads (the writes
the written-view class covers; every other op passes the key by a fallthrough, at no cost). Such a kernel asks the
watcher (:class:`dmlprof.record.recorder.OtherThreadWrites`) whether the write is one of the class; only where it is
does the watch keep anything, and its row joins the recording only where a backward runs through the write. On a
device whose views report offset 0 (real torch-directml) the key has kernels on the view ops too, whose offsets the
watcher keeps as the recorder keeps its own thread's (dmlprof.directml.view_offsets): else a thread's write could
not be told to be past its base's start there.

The key is ``TESTING_ONLY_GenericMode``: a functionality key no tensor carries and torch registers nothing on (torch
2.4 to 2.13), above autograd, so a kernel there sees the user's call before autograd records it and, once the call
returned, the CopySlices node autograd left on the view's base. The kernels stay registered once made (as the tap's
do); a thread that outlives the recording drops the key from its include set at its next call that has one.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Optional

import torch

from dmlprof.record.tap import UNSEEN_OPS, PerOpKernels, call_as_dispatched, tap_key
from dmlprof.tables.wrong_classes import in_place_by_name

#: the dispatch key of the threads whose writes are watched (see the module docstring)
WATCH_KEY_NAME = "TESTING_ONLY_GenericMode"
_META, _PYTHON = torch._C.DispatchKey.Meta, torch._C.DispatchKey.Python
_profiler_enabled = getattr(torch._C._autograd, "_profiler_enabled", lambda: False)
_enable_record_function = getattr(torch._C._autograd, "_enable_record_function", None)

#: the watcher of other threads' writes while a recording is on (``before_write``, ``after_write``), else None
_watcher = None
_fallthrough = None
_kernels: Optional[PerOpKernels] = None
#: the view ops' kernels, made once a recording on a device whose views do not report their offsets watched
_view_kernels: Optional[PerOpKernels] = None


def watch_key():
    return torch._C._parse_dispatch_key(WATCH_KEY_NAME)


@contextmanager
def other_threads_watched(watcher, views: bool = False):
    """Every thread started in the block has its in-place writes shown to ``watcher`` (``before_write(func, args,
    kwargs)`` -> a token or None, then ``after_write(token, out)`` once the write returned), and with ``views`` the
    views it makes (``view_made(func, args, kwargs, out)``: a device whose views do not report their offsets, real
    torch-directml's); where this torch has no room for the key, the block runs as before, those writes unjudged."""
    global _watcher
    bootstrap = getattr(threading.Thread, "_bootstrap_inner", None)
    if bootstrap is None or not _register_kernels(views):
        yield
        return
    key = watch_key()

    def _bootstrap_inner(self):
        if _watcher is None:  # started past the recording (a restored method kept by another patch's)
            return bootstrap(self)
        with torch._C._IncludeDispatchKeyGuard(key):
            return bootstrap(self)

    _watcher = watcher
    threading.Thread._bootstrap_inner = _bootstrap_inner
    try:
        yield
    finally:
        _watcher = None
        if threading.Thread._bootstrap_inner is _bootstrap_inner:  # else a later patch wraps ours: left, inert
            threading.Thread._bootstrap_inner = bootstrap


def refresh() -> None:
    """Cover in-place ops defined since the kernels were registered (an extension imported later)."""
    for kernels in (_kernels, _view_kernels):
        if kernels is not None:
            kernels.refresh()


def _register_kernels(views: bool) -> bool:
    """The key's kernels (with ``views``, the view ops' too), registered once a process; False where the key is
    taken in this torch."""
    global _view_kernels
    if not _register_write_kernels():
        return False
    if views and _view_kernels is None:
        _view_kernels = PerOpKernels(WATCH_KEY_NAME, _noting_kernel, wanted=_makes_a_view)
    if _view_kernels is not None:
        _view_kernels.refresh()
    return True


def _register_write_kernels() -> bool:
    global _fallthrough, _kernels
    if _kernels is None:
        try:
            key = watch_key()
            if torch._C._dispatch_has_backend_fallback(key):
                return False
            _fallthrough = torch.library.Library("_", "IMPL")
            _fallthrough.m.fallback_fallthrough(WATCH_KEY_NAME)
        except (RuntimeError, AttributeError):
            return False
        _kernels = PerOpKernels(WATCH_KEY_NAME, _watching_kernel, wanted=in_place_by_name)
    _kernels.refresh()
    return True


def _watching_kernel(overload):
    """The key's kernel for one in-place op: the write shown to the watcher, run as the thread would run it."""
    key = watch_key()
    watch, tap = torch._C.DispatchKeySet(key), tap_key()

    def kernel(keyset, *args, **kwargs):
        watcher = _watcher
        token = None
        if watcher is None:  # the recording ended: this thread is watched no more
            torch._C._dispatch_tls_set_dispatch_key_included(key, False)
        elif _into_a_view(args) and not (
                keyset.has(_META) or keyset.has(_PYTHON) or torch._C._len_torch_dispatch_stack()
                or torch._C._dispatch_tls_is_dispatch_key_included(tap)):  # tracing, or a thread the tap records
            token = watcher.before_write(overload, args, kwargs)
        with torch._C._ExcludeDispatchKeyGuard(watch):
            out = _call_unseen_by_profilers(overload, args, kwargs)
        if token is not None:
            watcher.after_write(token, out)
        return out
    return kernel


#: aliases no Python kernel may hand back (a tensor made of them gets a Python object of its own class: the tap's
#: UNSEEN_OPS), and ``torch.tensor``'s ``lift_fresh`` (the new tensor itself)
_NOT_NOTED = UNSEEN_OPS | {"aten::lift_fresh"}


def _makes_a_view(name: str) -> bool:
    """Whether an aten op returns a view of its input (its first return aliases an argument, unwritten) by a kernel
    of its own: a composite one (``reshape``, ``narrow``, ``to``) makes its view by the ops it calls, seen there."""
    if name in _NOT_NOTED or in_place_by_name(name) or not name.startswith("aten::") or \
            torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"):
        return False
    base, _, overload = name.partition(".")
    try:
        returns = torch._C._get_schema(base, overload).returns
    except (RuntimeError, AttributeError):
        return False
    alias = returns[0].alias_info if returns else None
    return alias is not None and not alias.is_write


def _noting_kernel(overload):
    """The key's kernel for one view op: the view made, shown to the watcher (it keeps the offset the device's view
    does not report), all below the key (the watcher's own view calls on meta twins are not seen again)."""
    key = watch_key()
    watch = torch._C.DispatchKeySet(key)

    def kernel(keyset, *args, **kwargs):
        watcher = _watcher
        if watcher is None:
            torch._C._dispatch_tls_set_dispatch_key_included(key, False)
        with torch._C._ExcludeDispatchKeyGuard(watch):
            out = _call_unseen_by_profilers(overload, args, kwargs)
            if watcher is not None and not (keyset.has(_META) or keyset.has(_PYTHON)):
                watcher.view_made(overload, args, kwargs, out)
        return out
    return kernel


def _into_a_view(args) -> bool:
    """Whether a write may be into a view (only those are judged): most in-place calls (an activation's, an update
    of a whole tensor) are let through on this one look."""
    written = args[0] if args else None
    return not isinstance(written, torch.Tensor) or written._is_view()


def _call_unseen_by_profilers(overload, args, kwargs):
    """The call, as the dispatcher would have made it; under a profiler, without a second event nested in the
    user's call (the recorder takes such nested pairs for its own rows' calls: dmlprof.record.profiler)."""
    if _enable_record_function is None or not _profiler_enabled():
        return call_as_dispatched(overload, args, kwargs)
    _enable_record_function(False)
    try:
        return call_as_dispatched(overload, args, kwargs)
    finally:
        _enable_record_function(True)
