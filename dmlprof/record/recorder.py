"""The live recorder: one row per op call the device's dispatcher sees.

A tap on the dispatcher (:mod:`dmlprof.record.tap`) sits below autograd, so it
sees exactly the calls that reach the backend (after composite-implicit ops
have decomposed), with their overload names, tensors and devices, and, not
being a dispatch mode, changes none of the paths ATen takes. Per call it keeps only cheap metadata;
verdicts and strings are built once, after recording, in :func:`rows_to_frame`.
"""
from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from typing import Optional

import torch

from dmlprof.record import budget
from dmlprof.record.collectives import comm_phase
from dmlprof.record.attribution import ModuleTracker, user_source_line
from dmlprof.record.journal import process_journal
from dmlprof.record.frame import leaves_device, op_name, rows_to_frame
from dmlprof.record.profiler import mark_rows_dropped
from dmlprof.record.tap import DispatcherTap, call_as_dispatched
from dmlprof.record.thread_writes import other_threads_watched, refresh as refresh_thread_writes
from dmlprof.record.warning_capture import WarningCapture
from dmlprof.record.written_views import WRITTEN_VIEW_MARK, WrittenViews, not_backpropagated, written_bases
from dmlprof.tables.wrong_classes import written_view_backpropagated

#: the most op calls one recording holds (about 2 KB each until the session is saved: ~2 GB at most,
#: benchmarks/results/recording_bound.json); past it the calls run unrecorded, and the session says so
MAX_RECORDED_CALLS = 1_000_000
_perf_ns = time.perf_counter_ns
_Tensor = torch.Tensor
_current_node = torch._C._current_autograd_node
_thread_id = threading.get_ident
# Calls func inside a fresh C++ warning handler (HANDLE_TH_ERRORS), so the
# warnings a kernel raises (a backend's CPU-fallback warning) reach Python when
# this call returns, not when the outermost Python call does; on autograd's
# device threads they would otherwise be held until backward() ends.
_call_flushing_warnings = torch._C._disabled_torch_function_impl


def _call_catching(func, args, kwargs):
    """``(func(*args, **kwargs), None)`` or ``(None, exception)``: no Python error may be
    pending when that handler flushes its warnings (CPython would raise SystemError)."""
    try:
        return call_as_dispatched(func, args, kwargs), None
    except BaseException as exc:  # re-raised by the caller once the call is recorded
        return None, exc
# Ops the profiler itself issues through the dispatcher; never the user's.
_SKIP_NAMESPACES = frozenset({"profiler"})


#: a device's type by the device: ``tensor.device.type`` builds a string each time (half of a tensor's facts' cost)
_device_types: dict = {}


def _device_type(device) -> str:
    found = _device_types.get(device)
    if found is None:
        found = _device_types[device] = device.type
    return found


#: what a nested tensor's ragged dim (one size per component, none of its own) reads as in a recorded shape
RAGGED_DIM = -1
#: the tensor types whose shape is read at once (a jagged nested tensor is a subclass: its flag is read first)
_PLAIN_TENSORS = frozenset({torch.Tensor, torch.nn.Parameter})


def _facts(tensor) -> tuple:
    try:
        size = tensor.nbytes
    except RuntimeError:  # a sparse tensor has no nbytes: its dense size, as numel counts it
        size = tensor.numel() * tensor.element_size()
    # a nested tensor's shape raises (strided layout) or holds a symbol (jagged: ``j1``): it is read dim by dim;
    # the flag is read only off a tensor subclass or a shape that fails: a plain tensor's facts cost one set lookup
    # more (about 30 ns of 450)
    try:
        plain = type(tensor) in _PLAIN_TENSORS or not tensor.is_nested
        shape = tuple(tensor.shape) if plain else _nested_shape(tensor)
    except RuntimeError:
        if not tensor.is_nested:
            raise
        shape = _nested_shape(tensor)
    return (_device_type(tensor.device), tensor.dtype, shape, size)


def _nested_shape(tensor) -> tuple:
    """``(2, -1, 4)`` for the components ``[2, 4]`` and ``[3, 4]``: the number of components, then each dim's size
    where every component has it, :data:`RAGGED_DIM` where they differ."""
    shape = []
    for dim in range(tensor.dim()):
        try:
            size = tensor.size(dim)
        except RuntimeError:  # "Given dimension 1 is irregular and does not have a size"
            size = RAGGED_DIM
        shape.append(size if isinstance(size, int) else RAGGED_DIM)  # a jagged dim's size is a symbol
    return tuple(shape)


def _tensor_meta(values) -> tuple:
    """(device type, dtype, shape, bytes) for each tensor among ``values`` (every recorded call's inputs and outputs:
    each fact read the cheapest way)."""
    found = []
    for value in values:
        if isinstance(value, _Tensor):
            found.append(_facts(value))
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, _Tensor):
                    found.append(_facts(item))
    return tuple(found)


def _outputs_tuple(out) -> tuple:
    if isinstance(out, _Tensor):
        return (out,)
    if isinstance(out, (list, tuple)):
        return tuple(out)
    return ()


class _Calls:
    """The tap's handler: records each call, then hands its result back."""

    def __init__(self, recorder: "Recorder"):
        self.recorder = recorder

    def __call__(self, func, args, kwargs):
        rec = self.recorder
        with rec.tap.paused():  # what runs here, the op's nested calls included, is not the user's call
            if rec.written_views.pending:  # autograd has rebuilt the history of the views written before this call
                rec.written_views.settle()
            if func.namespace in _SKIP_NAMESPACES or not rec.active or rec.full:
                refuse_or_call = rec.refusals.refuse_or_call if rec.refusals is not None else None
                # unrecorded, but the process must not end here either
                return refuse_or_call(func, args, kwargs) if refuse_or_call else call_as_dispatched(func, args, kwargs)
            return self._record(rec, func, args, kwargs)

    @staticmethod
    def _record(rec, func, args, kwargs):
        inputs = _tensor_meta(args)
        if kwargs:
            inputs += _tensor_meta(kwargs.values())
        phase = rec.phase or rec.infer_phase()
        module, source = rec.modules.owner(phase, rec.optimizer_name)
        collective = comm_phase(func)  # c10d collectives are a phase of their own, attributed as if not
        if collective is not None:
            phase = collective
        if rec.before_call is not None:  # a worker's own note of the call about to run (tools/realdml)
            rec.before_call(func, inputs)
        journal = rec.journal
        # written before the call runs: a call that ends the process (a native crash) is still named
        # (the overload itself: the journal names it once, not each call)
        journaled = journal.begin(func, rec.step, phase, module, inputs) if journal is not None else None
        verifier = rec.verifier
        # --verify: host copies of the inputs, before an in-place or out= call overwrites them.
        pending = verifier.before(func, args, kwargs) if verifier is not None else None
        rec.warnings.keep_first()  # the scanned code may have put a filter of its own in front ("ignore")
        evidence = rec.evidence
        warned_before = len(evidence)
        start = _perf_ns()
        # how the device's rules say this call fails, judged before it runs (a failing kernel may reshape its
        # inputs); a call that would end the process fails here instead, recorded
        found = rec.rule(func, args, kwargs) if rec.rule is not None else None
        # what a wrong-result class is keyed by, read before the call (an in-place call may overwrite it)
        arguments = rec.arguments_of(func, args, kwargs) if rec.arguments_of is not None else ""
        if rec.capture is not None:  # scan --confirm: the call's signature, to replay on real torch-directml
            rec.capture(func, args, kwargs, len(rec.rows))
        refused = rec.backend.refusal_for(found) if found is not None else None
        if refused is None:
            rec.warnings.in_call = True  # the warnings that arrive now are torch's (warn-once unless the script asks)
            out, failed = _call_flushing_warnings(_call_catching, (), (func, args, kwargs), {})
            rec.warnings.in_call = False
        else:
            out, failed = None, refused
        if rec.view_noted is not None and failed is None:  # before the view is written into (a later call)
            rec.view_noted(func, args, kwargs, out)
        outputs = _outputs_tuple(out)
        if rec.sync is not None and failed is None:
            try:
                rec.sync(outputs)
            except Exception as exc:  # the device failed running this call: the sync is where it tells
                failed = exc
        elapsed = _perf_ns() - start
        warned_after = len(evidence)

        out_meta = _tensor_meta(outputs)
        if (collective is not None or warned_after != warned_before or failed is not None or arguments
                or rec.wants_source(func, inputs, out_meta)):
            # The user's own line matters most where a call leaves the device, or fails, or has arguments a
            # wrong-result class is keyed by (an in-place write is in one only by them: not every one is looked up).
            source = user_source_line(2) or source
        thread = _thread_id()
        written_view = WRITTEN_VIEW_MARK in arguments  # its finding waits for a backward through its CopySlices
        if written_view:
            arguments = not_backpropagated(arguments)
        row = (rec.step, phase, func, inputs, out_meta, start, elapsed, warned_before, warned_after,
               module, source, thread, arguments)
        rec.rows.append(row)
        if written_view and failed is None:
            rec.written_views.watch(args, kwargs, row, len(rec.rows) - 1, journaled)
        if journal is not None:
            fallen = rec.fallen_in(warned_before, warned_after) if warned_after != warned_before else ()
            journal.end(journaled, out_meta, start, elapsed, thread, source, fallen, arguments)
        rec.held_bytes += budget.row_bytes(inputs, out_meta)
        if len(rec.rows) >= rec.next_limit or rec.held_bytes >= rec.next_bytes:  # bounded (Recorder.limit_reached)
            rec.limit_reached()
        if failed is not None:  # the call that broke the step stays in the (partial) session
            rec.failed_row = len(rec.rows) - 1
            # where the run ends, caught or not: a call refused in place, or an abort the device raised instead
            if (refused is not None or rec.backend.abort_raised(failed)) and rec.refused_row is None:
                rec.refused_row = rec.failed_row
                if journal is not None:  # an os._exit after it (an exit handler's) must not lose it (re-probe 14)
                    _journal_refusal(journal, journaled, rec.backend, failed, func)
            if rec.device_lost_row is None and rec.backend.lost_device(failed):
                rec.device_lost_row = rec.failed_row  # later failures are the lost device's, not their ops'
            if found is not None:
                rec.backend.note_failure(failed, found)
            if found is not None or rec.backend.failure_in(failed, _touches(rec.backend.device_type, inputs)):
                rec.refused_rows.add(rec.failed_row)  # sent to the device, never run there: no device call
            # Raised while a local of this frame names it, the error's traceback holds this frame and the frame the
            # error: a cycle that keeps the call's arguments and, through the traceback, the user's frames and their
            # activations until the cycle collector runs, long after the script caught the error and let it go
            # (re-probe 16, case 11: a batch-size finder catching out-of-memory errors picked a 16x smaller batch).
            try:
                raise failed
            finally:
                failed = refused = None
        if pending is not None:
            verifier.after(pending, args, kwargs, out, step=rec.step, phase=phase, module=module, source=source,
                           seq=len(rec.rows) - 1)
        return out


class OtherThreadWrites:
    """The written-view class in the threads the recorder does not record (:mod:`dmlprof.record.thread_writes`
    shows it their in-place writes): a write into a view past its base's start, made while the recorder records,
    is watched, not recorded; a backward through it makes its row (:mod:`dmlprof.record.written_views`). Neither
    method raises into the user's call: a write it cannot judge stays unjudged, as before."""

    def __init__(self, rec: "Recorder", judge):
        self.recorder = rec
        #: ``judge(func, args, kwargs) -> str``: the written-view class's arguments alone (it reads no values)
        self.judge = judge

    def before_write(self, func, args, kwargs):
        """What to keep of a write about to run (its arguments read before it overwrites them), or None."""
        try:
            rec = self.recorder
            if not rec.records_now:
                return None
            views = rec.written_views
            if views.pending:  # this thread's earlier writes (a Function's forward) have their nodes by now
                views.settle()
            arguments = self.judge(func, args, kwargs)
            if WRITTEN_VIEW_MARK not in arguments:
                return None
            found = written_bases(args, kwargs)
            inputs = _tensor_meta(args) + (_tensor_meta(kwargs.values()) if kwargs else ())
            return (func, found, inputs, arguments, rec.step, _perf_ns()) if found else None
        except Exception:
            return None

    def view_made(self, func, args, kwargs, out) -> None:
        """A view made in such a thread, on a device whose views do not report their offsets: its offset kept."""
        try:
            self.recorder.view_noted(func, args, kwargs, out)
        except Exception:
            pass

    def after_write(self, kept, out) -> None:
        """The write returned: its views' bases watched, its row kept for a backward through it."""
        try:
            func, found, inputs, arguments, step, start = kept
            elapsed = _perf_ns() - start
            rec = self.recorder
            phase = rec.infer_phase()
            module, source = rec.modules.owner(phase, rec.optimizer_name)
            warned = len(rec.evidence)
            row = (step, phase, func, inputs, _tensor_meta(_outputs_tuple(out)), start, elapsed, warned, warned,
                   module, user_source_line() or source, _thread_id(), written_view_backpropagated(arguments))
            rec.written_views.watch_unrecorded(found, row)
        except Exception:
            pass


def _journal_refusal(journal, journaled: Optional[int], backend, failed: BaseException, func) -> None:
    """The refused call's finding, journaled (``journaled``: the recorded call's journal number, None for a call
    nothing records): never an error of dmlprof's in the user's call."""
    try:
        journal.refusal(journaled, backend.refusal_words(failed, op_name(func)))
    except Exception:  # the words could not be made: the salvaged session names the call as it ran, as before
        pass


def _touches(device_type: str, inputs) -> bool:
    """Whether a call's inputs (tensor metadata) were on the device."""
    return any(meta[0] == device_type for meta in inputs)


class Recorder:
    """Records op calls while active. Use as a context manager.

    ``phase`` may be set by the runner (contract mode); when ``None`` it is
    inferred from optimizer hooks, the autograd engine and the module stack.
    Collectives always get the phase ``comm``.
    """

    #: the recorder now recording, if any, and the one entered last (its rows outlive it): read,
    #: never changed, by a distributed run's watchdog thread and SIGTERM handler (dmlprof.distributed)
    current: "Optional[Recorder]" = None
    last: "Optional[Recorder]" = None

    def __init__(self, backend, sync: bool = True, verifier=None):
        self.backend = backend
        #: a :class:`dmlprof.verify.Verifier` (scan --verify) or None
        self.verifier = verifier
        self.sync = backend.synchronize if (sync and backend.is_accelerator()) else None
        self.rows: list = []
        #: rows of calls the device refused (the code may have caught it): counted as refused, not as device calls
        self.refused_rows: set = set()
        #: how many times the rows were dropped: a reader that polls the rows (the distributed watchdog) can
        #: tell a drop from a count that merely grew past the old one between two looks
        self.drops = 0
        #: the row of the call that raised, when one did
        self.failed_row: Optional[int] = None
        #: the row of the first call refused in place (the device would have ended the process there)
        self.refused_row: Optional[int] = None
        #: the row of the call in which the device was lost (every call after it fails): the one finding
        self.device_lost_row: Optional[int] = None
        self.step = 0
        self.phase: Optional[str] = None
        self.active = True
        self.optimizer_name = ""
        self._in_optimizer = 0
        self.modules = ModuleTracker(on_root_forward=self._refresh_tap)
        self.warnings = WarningCapture()
        #: where fallback evidence arrives, in order: the warnings raised (live backends), or
        #: the names a stand-in backend logs itself; rows keep their span of it
        self.evidence = backend.fallback_log if backend.fallback_log is not None else self.warnings.messages
        self.tap = DispatcherTap(_Calls(self))
        #: where each call is written down as it happens (:mod:`dmlprof.record.journal`), when a scan's
        #: parent process asked for one: a native crash then still leaves the recording
        self.journal = None
        #: ``before_call(func, inputs)``, called before each recorded call runs (the truth worker's own note)
        self.before_call = None
        #: ops whose calls the report points at by the user's line (the backend's known wrong results)
        self.flagged_ops = backend.flagged_ops()
        #: the device's rules: how a call fails there, judged from its arguments (None: a device without rules)
        self.rule = backend.failure_rule()
        #: the device's wrong-result classes: the arguments of a call they are keyed by (None: none)
        self.arguments_of = backend.arguments_rule() if hasattr(backend, "arguments_rule") else None
        #: ``note(func, args, kwargs, out)`` after each call, where the device's views do not report their offsets
        #: (real torch-directml: :mod:`dmlprof.directml.view_offsets`), else None
        self.view_noted = backend.view_rule() if hasattr(backend, "view_rule") else None
        #: the writes into views past their base's start, made findings where a backward runs through them
        self.written_views = WrittenViews(self)
        #: the same writes in the threads started while recording (None: a device with no such class)
        judge = backend.written_view_rule() if self.arguments_of is not None and hasattr(
            backend, "written_view_rule") else None
        self.other_threads = OtherThreadWrites(self, judge) if judge is not None else None
        #: steps the script's window leaves unrecorded run now (dmlprof.record.window): read by other threads
        self.unrecorded_steps = False
        #: ``capture(func, args, kwargs, row)`` before each recorded call (a prediction's backend asked for
        #: scan --confirm: :class:`dmlprof.confirm.signatures.SignatureCapture`), else None
        self.capture = getattr(backend, "capture", None)
        #: the same rules on the calls that pass unrecorded (a full or inactive recorder)
        self.refusals = _Refusals(self.rule, backend) if self.rule is not None else None
        #: script mode: the optimizer steps recorded (:mod:`dmlprof.record.window`)
        self.window = None
        #: the most calls kept (:data:`MAX_RECORDED_CALLS`); once ``rows`` holds that many the recorder is
        #: ``full`` and calls run unrecorded until the rows are dropped (a script's warm-up)
        self.max_calls = MAX_RECORDED_CALLS
        #: the most bytes the rows may hold (:mod:`dmlprof.record.budget`), and about what they hold now
        self.max_bytes = budget.MAX_RECORDED_BYTES
        self.held_bytes = 0
        self.full = False
        #: how many calls the rows held each time the recorder filled up (what the session says it left out)
        self.filled_at: list = []
        #: one-shot callbacks by row count (torch.profiler's own cap); the row count the next one is due at
        self._due: list = []
        self.next_limit = self.max_calls
        self.next_bytes = self.max_bytes
        self._enabled = None
        self._threads_watched = None
        self._hook_handles: list = []

    @property
    def records_now(self) -> bool:
        """Whether calls are recorded now (the recording thread's include set says it; other threads read this)."""
        return self.active and not self.full and not self.unrecorded_steps

    def frame(self):
        """The op frame of the calls recorded so far, each judged (:func:`~dmlprof.record.frame.rows_to_frame`):
        what every reader of a recording builds its figures from (the runner, the sweep's child, a stuck rank)."""
        return rows_to_frame(list(self.rows), list(self.evidence), self.backend, refused=self.refused_rows)

    # -- phase inference -----------------------------------------------------
    def infer_phase(self) -> str:
        if self._in_optimizer:
            return "optimizer"
        if _current_node() is not None:
            return "backward"
        if self.modules.stack:
            return "forward"
        return "other"

    def _optimizer_pre(self, optimizer, args, kwargs):
        self._in_optimizer += 1
        self.optimizer_name = f"optimizer.{type(optimizer).__name__}"

    def _optimizer_post(self, optimizer, args, kwargs):
        self._in_optimizer = max(0, self._in_optimizer - 1)
        self._refresh_tap()
        if self.phase is None:  # script mode: each optimizer step ends a step
            if self.window is not None:
                self.window.after_step(self)
            else:
                self.step += 1

    def drop_rows(self) -> None:
        """Forget what was recorded so far (a script's warm-up steps); a full recorder records again."""
        mark_rows_dropped()  # torch.profiler saw those calls: the mark says where the rows begin
        if self.journal is not None:
            self.journal.rows_dropped()
        self.rows.clear()
        self.drops += 1
        self.held_bytes = 0
        self.failed_row = self.refused_row = self.device_lost_row = None
        self.full = False
        self._arm()

    # -- what a recording may cost ---------------------------------------------
    def when_rows_reach(self, count: float, callback, held_bytes: float = float("inf")) -> None:
        """Call ``callback()`` once, on the thread recording, when the rows first hold ``count`` calls or about
        ``held_bytes`` bytes (:mod:`dmlprof.record.budget`), or the recorder fills up."""
        self._due.append((count, held_bytes, callback))
        self._arm()

    def _arm(self) -> None:
        self.next_limit = min([self.max_calls] + [count for count, _, _ in self._due])
        self.next_bytes = min([self.max_bytes] + [nbytes for _, nbytes, _ in self._due])

    def limit_reached(self) -> None:
        """The rows reached a limit: run what is due, and past :attr:`max_calls` stop keeping calls."""
        held = len(self.rows)
        filling = held >= self.max_calls or self.held_bytes >= self.max_bytes
        # the rows of a recorder that fills up grow no more: what waits for a row count is due now (the profiler's
        # stop, which would otherwise run on with the calls that pass unrecorded)
        now = [filling or count <= held or nbytes <= self.held_bytes for count, nbytes, _ in self._due]
        due = [entry[2] for entry, ready in zip(self._due, now) if ready]
        self._due = [entry for entry, ready in zip(self._due, now) if not ready]
        for callback in due:
            callback()
        if filling:
            self.full = True
            self.filled_at.append(held)
            self.next_limit = self.next_bytes = float("inf")
            # and at full speed on this thread (other threads pass the tap, unrecorded): a script's warm-up
            # end (dmlprof.record.window) turns recording back on
            torch._C._dispatch_tls_set_dispatch_key_included(self.tap.key, False)
        else:
            self._arm()

    def _refresh_tap(self) -> None:
        # Ops an extension defined since the run began (torchvision imported by the model).
        if self.tap.refresh():  # (each look lists torch's ~3,600 ops: 2 ms, at every root forward)
            refresh_thread_writes()
        self.backend.refresh()

    def fallen_in(self, first: int, last: int) -> tuple:
        """The ops the backend says fell back, in the evidence that arrived between two points."""
        names = (self.backend.fallback_ops_in(item) for item in self.evidence[first:last])
        return tuple(name for name in names if name)

    def wants_source(self, func, inputs, outputs) -> bool:
        """Whether a call leaves the device (tensors on the host, a sync), or is one of the backend's ops the
        report will point at (known wrong results): worth a source line."""
        if not self.backend.is_accelerator():
            return False
        return leaves_device(func, inputs, outputs, self.backend.device_type) or op_name(func) in self.flagged_ops

    # -- lifecycle -----------------------------------------------------------
    def __enter__(self):
        self.tap.install()
        Recorder.current = Recorder.last = self
        self.warnings.__enter__()
        self.modules.install()
        import torch.optim.optimizer as optim
        self._hook_handles = [
            optim.register_optimizer_step_pre_hook(self._optimizer_pre),
            optim.register_optimizer_step_post_hook(self._optimizer_post),
        ]
        if self.verifier is not None:
            self.verifier.attach(self)
        self._enabled = self.tap.enabled()
        self._enabled.__enter__()
        if self.other_threads is not None:
            self._threads_watched = other_threads_watched(self.other_threads, views=self.view_noted is not None)
            self._threads_watched.__enter__()
        return self

    def __exit__(self, *exc):
        # Idempotent: a run that stops early closes the recorder before the
        # ``with`` block unwinds and closes it again.
        if self._enabled is None:
            return False
        enabled, self._enabled = self._enabled, None
        if Recorder.current is self:
            Recorder.current = None
        try:
            enabled.__exit__(None, None, None)
        finally:
            watched, self._threads_watched = self._threads_watched, None
            if watched is not None:
                watched.__exit__(None, None, None)
            for handle in self._hook_handles:
                handle.remove()
            if self.verifier is not None:
                self.verifier.detach()
            self.modules.remove()
            self.warnings.__exit__(*exc)
            self.tap.remove()
            self.written_views.forget()
        return False


class _Refusals:
    """The backend's refusals alone, no recording: around steps nothing records (a warm-up step), a
    call that would end the process raises in its place, as it does while recording. It counts the calls
    it sees (:attr:`calls`): a long unrecorded first step shows how far it got."""

    def __init__(self, rule, backend):
        self.rule, self.backend = rule, backend
        #: a scan's child names the call a native crash ends the process in, recorded or not
        self.journal = process_journal()
        self.tap = None
        self._enabled = None
        #: calls seen so far (read by the progress bar's clock thread; only this thread writes it)
        self.calls = 0

    def refuse_or_call(self, func, args, kwargs):
        """Raise the backend's refusal of this call, where it has one; else run it (an abort the device raises
        in its place is kept: :meth:`~dmlprof.backends.base.Backend.abort_raised`)."""
        found = self.rule(func, args, kwargs) if self.rule is not None else None
        refused = self.backend.refusal_for(found) if found is not None else None
        journal = self.journal
        if refused is not None:
            if journal is not None and refused is self.backend.first_refusal:
                _journal_refusal(journal, None, self.backend, refused, func)
            try:
                raise refused
            finally:  # no cycle through this frame (see _Calls._record)
                refused = None
        try:
            if journal is None:
                return call_as_dispatched(func, args, kwargs)
            inputs = _tensor_meta(args) + (_tensor_meta(kwargs.values()) if kwargs else ())
            journal.unrecorded(func, inputs)  # the call to name if the process dies in it
            out = call_as_dispatched(func, args, kwargs)
        except Exception as exc:
            first = self.backend.first_refusal is None
            if self.backend.abort_raised(exc) and first and journal is not None:
                _journal_refusal(journal, None, self.backend, exc, func)
            raise
        journal.unrecorded_returned()
        return out

    def _call(self, func, args, kwargs):
        self.calls += 1
        with self.tap.paused():
            return self.refuse_or_call(func, args, kwargs)

    def __enter__(self):
        self.tap = DispatcherTap(self._call)
        self.tap.install()
        self._enabled = self.tap.enabled()
        self._enabled.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            self._enabled.__exit__(None, None, None)
        finally:
            self.tap.remove()
        return False


def refusals(backend, counted: bool = False):
    """A context in which the backend's refusals hold though nothing records, and an abort its device raises
    in a call's place is kept (``nullcontext`` for a backend that does neither: only the real torch-directml
    refuses calls that would end its process, only the emulated device raises for them). With ``counted`` (a
    progress bar is drawn) the tap is there on every backend, to count the calls."""
    if not (backend.refuses_calls or backend.raises_for_aborts or counted):
        return nullcontext()
    return _Refusals(backend.failure_rule() if backend.refuses_calls else None, backend)
