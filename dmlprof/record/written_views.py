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


class WrittenViews:
    """The writes into views past their base's start that the recorder kept, until their CopySlices is known."""

    def __init__(self, recorder):
        self.recorder = recorder
        #: (thread, base (weakly), the base's grad_fn before the write, the row): read, unlocked, on every call
        self.pending: list = []
        self._lock = threading.Lock()

    def watch(self, args, kwargs, row: tuple, index: int, journaled) -> None:
        """The write of ``rows[index]`` (``row``) returned to the tap: keep its views' bases to read their nodes."""
        written = args[0] if args else kwargs.get("self")
        found = []
        for view in (written if isinstance(written, (list, tuple)) else (written,)):
            base = view._base if isinstance(view, torch.Tensor) and view._is_view() else None
            if base is not None:
                found.append((weakref.ref(base), base.grad_fn))
        if found:
            written_row, thread = _WrittenRow(self.recorder, index, row, journaled), _thread_id()
            with self._lock:
                self.pending.extend((thread, base, before, written_row) for base, before in found)

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
            if after is None or after is before or type(after).__name__ != "CopySlices":
                continue  # autograd recorded no write (no_grad, a detached base): no gradient to go wrong
            if after is current:  # the backward is in it now (a root the engine started with): too late to hook
                written_row.backpropagated()
            else:
                try:
                    after.register_prehook(written_row.hook)
                except (RuntimeError, AttributeError, TypeError):  # a torch without node pre-hooks: unwatched,
                    pass  # never an error in the user's call

    def forget(self) -> None:
        """The recording ended: nothing more is watched (no base or node is held past it)."""
        with self._lock:
            self.pending = []
