"""The written-view class made a finding only where a backward runs through the write's CopySlices node.

On real torch-directml an in-place write into a view past its base's start computes the right values; what goes
wrong is the gradient autograd's CopySlices node builds for it in a backward (docs/realdml.md). Judged at the
write alone, inference in ``eval()`` without ``no_grad`` and a loss kept in a preallocated tensor
(``losses[i] = loss``) failed ``check`` though no gradient of theirs is ever taken (re-probe 15, cases 1 and 2).
So a written view's row is kept as not backpropagated (``"backward_runs": false``), and the CopySlices node its
write leaves on the view's base gets a pre-hook that marks the row (and the journal) when a backward runs
through it. The hook returns None (the gradient is untouched) and holds no tensor, only the row's facts.

The tap sits below autograd: when the write's call returns to it, autograd has not rebuilt the view's history
yet. So the base (weakly) and its ``grad_fn`` before the write are kept, and the node is read at the thread's
next call through the tap (or any thread's call in a backward: the engine's device threads): a ``grad_fn`` that
changed into a CopySlices is the write's. One that did not change was a ``no_grad`` write; and a write inside an
``autograd.Function``'s forward (grad mode off) whose ``ctx.mark_dirty`` rebases the view when ``apply`` returns
is found the same way (re-probe 15, case 8).
"""
from __future__ import annotations

import threading
import weakref

import torch

from dmlprof.tables.wrong_classes import WRITTEN_VIEW_KEY, written_view_backpropagated

_current_node = torch._C._current_autograd_node
_thread_id = threading.get_ident
#: a written view's arguments, as JSON text, hold this (a cheap test on every call that kept arguments)
WRITTEN_VIEW_MARK = f'"{WRITTEN_VIEW_KEY}"'


def not_backpropagated(arguments: str) -> str:
    """A written view's arguments as the row keeps them until a backward runs through its write."""
    return written_view_backpropagated(arguments, runs=False)


class _WrittenRow:
    """One recorded write's row, found again when a backward runs through its CopySlices node (from the engine's
    thread): the recorder (weakly), its rows' generation (``drops``), the row's index and the row itself."""

    __slots__ = ("recorder", "drops", "index", "row", "journaled", "marked")

    def __init__(self, recorder, index: int, row: tuple, journaled):
        self.recorder = weakref.ref(recorder)
        self.drops = recorder.drops
        self.index, self.row, self.journaled = index, row, journaled
        self.marked = False

    def hook(self, grad_outputs):
        """The CopySlices node's pre-hook: None, so the gradient is autograd's own; never raises into it."""
        try:
            self.backpropagated()
        except Exception:  # the finding is lost, never the user's backward
            pass
        return None

    def backpropagated(self) -> None:
        if self.marked:
            return
        self.marked = True
        recorder = self.recorder()
        if recorder is None:
            return
        rows, index = recorder.rows, self.index
        if recorder.drops == self.drops and index < len(rows) and rows[index] is self.row:
            rows[index] = self.row[:-1] + (written_view_backpropagated(self.row[-1]),)
        journal = recorder.journal
        if journal is not None and self.journaled is not None:
            journal.backpropagated(self.journaled)


class _UnrecordedWrite(_WrittenRow):
    """A write made in a thread the recorder does not record (:mod:`dmlprof.record.thread_writes`): its row
    (``row``, its arguments saying a backward ran) joins the recording, and the journal, only when a backward runs
    through its CopySlices node, and only where the rows it was made among were not dropped since (a warm-up's)."""

    __slots__ = ()

    def __init__(self, recorder, row: tuple):
        super().__init__(recorder, -1, row, None)

    def backpropagated(self) -> None:
        if self.marked:
            return
        self.marked = True
        recorder = self.recorder()
        if recorder is None or recorder.drops != self.drops or recorder.full:
            return
        recorder.rows.append(self.row)
        journal = recorder.journal
        if journal is not None:
            step, phase, func, inputs, outputs, start, elapsed, _, _, module, source, thread, arguments = self.row
            journal.end(journal.begin(func, step, phase, module, inputs), outputs, start, elapsed, thread, source,
                        (), arguments)


class WrittenViews:
    """The writes into views past their base's start that the recorder kept, until their CopySlices is known."""

    def __init__(self, recorder):
        self.recorder = recorder
        #: (thread, base (weakly), the base's grad_fn before the write, the row): read, unlocked, on every call
        self.pending: list = []
        self._lock = threading.Lock()

    def watch(self, args, kwargs, row: tuple, index: int, journaled) -> None:
        """The write of ``rows[index]`` (``row``) returned to the tap: keep its views' bases to read their nodes."""
        found = written_bases(args, kwargs)
        if found:
            written_row, thread = _WrittenRow(self.recorder, index, row, journaled), _thread_id()
            with self._lock:
                self.pending.extend((thread, base, before, written_row) for base, before in found)

    def watch_unrecorded(self, found: list, row: tuple) -> None:
        """A write in a thread the recorder does not record returned (seen above autograd: its CopySlices is there
        now): ``found``, its views' bases before the write (:func:`written_bases`); ``row``, the row it makes where a
        backward runs through it. A node not made yet (an ``autograd.Function``'s forward, grad mode off) is read
        at the thread's next write, or in the next backward."""
        written_row = _UnrecordedWrite(self.recorder, row)
        later = []
        for base_ref, before in found:
            base = base_ref()
            after = base.grad_fn if base is not None else None
            if after is not None and after is not before:
                _hook(after, written_row, _current_node())
            elif not torch.is_grad_enabled():
                later.append((_thread_id(), base_ref, before, written_row))
        if later:
            with self._lock:
                self.pending.extend(later)

    def settle(self) -> None:
        """Read the nodes of the writes this thread made (every thread's in a backward)."""
        current = _current_node()
        thread = _thread_id()
        with self._lock:
            if current is not None:
                taken, self.pending = self.pending, []
            else:
                taken = [entry for entry in self.pending if entry[0] == thread]
                if not taken:
                    return
                self.pending = [entry for entry in self.pending if entry[0] != thread]
        for _, base_ref, before, written_row in taken:
            base = base_ref()
            after = base.grad_fn if base is not None else None
            if after is not None and after is not before:
                _hook(after, written_row, current)

    def forget(self) -> None:
        """The recording ended: nothing more is watched (no base or node is held past it)."""
        with self._lock:
            self.pending = []


def written_bases(args, kwargs) -> list:
    """``[(base (weakly), its grad_fn now)]`` of each view an in-place call writes (``self``, or a list of them)."""
    written = args[0] if args else kwargs.get("self")
    found = []
    for view in (written if isinstance(written, (list, tuple)) else (written,)):
        base = view._base if isinstance(view, torch.Tensor) and view._is_view() else None
        if base is not None:
            found.append((weakref.ref(base), base.grad_fn))
    return found


def _hook(node, written_row: _WrittenRow, current) -> None:
    """``node``, the grad_fn a write left on its view's base, marks ``written_row`` when a backward runs through it
    (``current``: the node the backward runs now, if any)."""
    if type(node).__name__ != "CopySlices":
        return  # autograd recorded no write (no_grad, a detached base): no gradient to go wrong
    if node is current:  # the backward is in it now (a root the engine started with): too late to hook
        written_row.backpropagated()
        return
    try:
        node.register_prehook(written_row.hook)
    except (RuntimeError, AttributeError, TypeError):  # a torch without node pre-hooks: unwatched,
        pass  # never an error in the user's call
