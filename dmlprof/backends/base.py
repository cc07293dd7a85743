"""The backend protocol: everything dmlprof needs to know about one device kind.

No module outside ``dmlprof/backends`` spells a device name or a vendor
workaround; they ask the backend object instead.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Optional

import torch

from dmlprof.backends.host_memory import peak_rss_bytes
from dmlprof.facts import BackendFacts
from dmlprof.meta import Device
# the boxed CPU fallback's warning, every backend's (its words live in the schema, a leaf the warning capture imports)
from dmlprof.schema import FALLBACK_WARNING  # noqa: F401


@dataclass
class MemoryReading:
    """Device memory in bytes; ``None`` where the backend cannot tell."""

    allocated_bytes: Optional[int] = None
    peak_bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    source: str = ""


@dataclass
class Availability:
    """Whether a backend can be used here, and why not when it cannot."""

    available: bool
    reason: str = ""
    details: dict = field(default_factory=dict)


class Backend:
    """Base class; subclasses override what differs for their device."""

    #: the name users pass to ``--device``
    name: str = "cpu"
    #: ``torch.device(...).type`` of tensors on this backend
    device_type: str = "cpu"
    #: the backend name inside fallback warnings, if the backend has a CPU fallback
    fallback_warning_name: Optional[str] = None
    #: whether calls on this backend can silently fall back to the CPU
    has_cpu_fallback: bool = False
    #: whether the backend can record device-side kernel times through torch.profiler
    profiler_device_activity: bool = False
    #: where a stand-in backend logs the ops it sends to the CPU (its own evidence); ``None``: the
    #: evidence is the backend's fallback warnings, read by :meth:`fallback_ops_in`
    fallback_log: Optional[list] = None
    #: what a fallback verdict rests on, as the report says it
    fallback_evidence: str = "fallback warning"
    #: a stand-in that predicts a device (calls, no times or values) rather than running on one
    predicted: bool = False
    #: a stand-in for torch-directml's device: scripts importing torch_directml get dmlprof's stand-in module
    stands_in_for_directml: bool = False
    #: a folder holding the ``torch_directml`` that processes a scanned script spawns import (``None``: one that
    #: names the device and makes no tensor; see ``directml_shim.installed``)
    spawned_stand_in: Optional[str] = None
    #: why a first step runs long on this device, said beside its count of calls until a step has ended
    #: ("" where nothing known makes it so)
    first_step_note: str = ""

    @classmethod
    def availability(cls) -> Availability:
        """Safe detection: never touches a device API that can crash."""
        return Availability(True)

    def __init__(self, index: int = 0):
        self.index = index

    # -- devices -----------------------------------------------------------
    def device(self) -> torch.device:
        return torch.device(self.device_type)

    def device_name(self) -> str:
        import platform

        return platform.processor() or platform.machine() or "CPU"

    def is_accelerator(self) -> bool:
        return self.device_type != "cpu"

    # -- timing ------------------------------------------------------------
    def synchronize(self, outputs=None) -> None:
        """Block until queued device work has finished (no-op on the CPU)."""

    # -- memory ------------------------------------------------------------
    def reset_peak_memory(self) -> None:
        pass

    def memory(self) -> MemoryReading:
        return MemoryReading(peak_bytes=peak_rss_bytes(), source="process peak RSS")

    #: the device's tensors live in this machine's memory (the CPU, the emulated DirectML device): the host's total
    #: and free memory are the device's, and the process's resident memory the nearest reading of what it holds
    memory_is_host: bool = False

    # -- fallback evidence -------------------------------------------------
    def fallback_ops_in(self, message: str) -> Optional[str]:
        """The op named by a fallback warning of this backend, else ``None``."""
        if not self.fallback_warning_name:
            return None
        match = FALLBACK_WARNING.search(message)
        if match and match.group("backend") == self.fallback_warning_name:
            return match.group("op")
        return None

    def prepare(self) -> None:
        """Called once before a scan: imports, environment switches."""

    def run_context(self):
        """A context around the whole run (model built, steps taken): what the backend needs meanwhile."""
        return contextlib.nullcontext()

    def refresh(self) -> None:
        """Ops may have been defined since the run began (an extension imported): cover them."""

    def run_meta(self) -> BackendFacts:
        """What this backend says of a run on it: its device (a subclass adds what it knows better: the
        adapter's class, what its times mean, a stand-in's prediction)."""
        return BackendFacts(Device(backend=self.name, device=str(self.device()),
                                   name=_or_default(self.device_name, "unknown"),
                                   versions=_or_default(self.versions, {})))

    def profiler_activities(self):
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU]

    def versions(self) -> dict:
        return {}

    def flagged_ops(self) -> frozenset:
        """Ops (dispatcher names) whose calls a report points at by the user's line: for DirectML, those whose
        results were wrong on the real torch-directml (the measured table)."""
        return frozenset()

    def failure_rule(self):
        """``rule(func, args, kwargs) -> failure or None``: how a call fails on this device, judged from its
        arguments before it runs (the rules measured on the device, dmlprof.directml.failures);
        ``None`` for a device without rules. The recorder asks it for every call it records."""
        return None

    #: whether :meth:`refusal_for` refuses any call (then warm-up steps, which nothing records, are guarded too)
    refuses_calls: bool = False

    def refusal_for(self, failure) -> Optional[BaseException]:
        """The error to raise in place of a call its rule says fails (only where running it would end the
        process: the real torch-directml's fatal checks); ``None`` to run the call."""
        return None

    #: whether the device raises an error the code can catch where DirectML's process ends (the emulated
    #: device's kernels say "torch-directml ends the process here"): the run keeps the first such call
    #: (:meth:`abort_raised`), and a run whose code caught it and went on ends with it, as with a refused
    #: call; the recording goes on past it (a harness replaying independent samples needs the calls after)
    raises_for_aborts: bool = False

    #: the first call refused in this run (:func:`refused_in_place`), or the first abort a device raised in
    #: its place (:meth:`abort_raised`): a refusal the user's code caught still ends the run, as the process
    #: death it stands for would have
    first_refusal: "Optional[BaseException]" = None

    def abort_raised(self, error: BaseException) -> bool:
        """Whether ``error`` is this device's words for a call that ends DirectML's process, raised in its place
        (:attr:`raises_for_aborts`); the first is kept in :attr:`first_refusal` (a script's ``except
        RuntimeError`` may catch it: the run still ends with it)."""
        if not self.raises_for_aborts or not isinstance(error, Exception):
            return False
        from dmlprof.directml.failures import ABORTS

        found = self.failure_in(error)
        if found is None or found.kind != ABORTS:
            return False
        if self.first_refusal is None:
            refused_in_place(error, self)
        return True

    def take_abort_note(self):
        """The device's own note of the aborts it raised in calls' places since the last take, recorded or not
        (``count``, the first one's ``op``, ``message``, ``pid`` and ``thread``), or ``None``: only a device that
        raises for aborts (:attr:`raises_for_aborts`) keeps one."""
        return None

    def notice_unrecorded_aborts(self, raised: Optional[BaseException] = None,
                                 run_thread: Optional[int] = None) -> None:
        """Read the device's note of the aborts it raised since the last look, wherever nothing recorded them (a
        warm-up step, past the recorded steps, another thread, a forked worker): the first counts as
        :meth:`abort_raised` counts a recorded one, unless one was kept already, and is journaled (a scan's child):
        a process that then ends without the run's end (``os._exit``, a crash) is salvaged with it as its finding.
        ``raised``: the error the step ended with, which is itself the abort when it was one; ``run_thread``: the
        native id of the run's thread, where another thread reads the note (the run's own, by default)."""
        note = self.take_abort_note()  # taken first: an abort already kept is not kept again later
        if note is None or self.first_refusal is not None:
            return
        if not (isinstance(raised, Exception) and self.abort_raised(raised)):  # the step ended with the abort itself
            raised = UnrecordedAbort(note, run_thread)
            self.abort_raised(raised)
        self._journal_unrecorded(raised)

    def _journal_unrecorded(self, abort: BaseException) -> None:
        """The first refusal, read from the device's note, in the process's journal (where a scan's child keeps one):
        the recorder journals the calls it saw refused itself, and nothing else would journal this one."""
        from dmlprof.record.journal import process_journal

        journal = process_journal()
        if journal is None or self.first_refusal is None:
            return
        op = getattr(abort, "op", "a call")
        where = getattr(abort, "where", "")
        try:
            journal.refusal(None, self.refusal_words(abort, f"{op}, {where}" if where else op))
        except Exception:  # the words could not be made: the run's own end still says it
            pass

    def forget_noted_aborts(self) -> None:
        """A run begins: the device's note of earlier aborts (an earlier run's, a test's) is not this run's."""
        self.take_abort_note()

    def note_failure(self, exc: BaseException, failure) -> None:
        """A call failed as its rule said: keep that with ``exc``, whatever words it came in."""

    def failure_in(self, exc: BaseException, touched_device: bool = True):
        """The device's own refusal of a call, where ``exc`` is one (a
        :class:`~dmlprof.directml.failures.Failure`), else ``None``: the call fails on this
        device, not in the user's code (``touched_device``: the call's tensors were on the device)."""
        return None

    def lost_device(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the device is gone (every later call fails): the failure to blame, once."""
        known = self.known_error(exc)
        return known is not None and known.key.endswith("device_removed")

    def refusal_words(self, error: BaseException, op: str) -> str:
        """The finding of a refused call as the journal keeps it (JSON; dmlprof.record.journal.Journal.refusal):
        what a salvaged session's ``device_failure`` says where the process ends after it through ``os._exit``,
        with nothing of the device at hand in the supervisor. ``went_on``: the device raised in the call's place
        and the code may run on, recorded (the emulated device, a prediction); else the call was refused before it
        ran, and nothing after it runs on DirectML."""
        import json

        from dmlprof.errors import CallRefused

        error = error.error if isinstance(error, CallRefused) else error
        found = self.failure_in(error)
        known = self.known_error(error)
        return json.dumps({"op": op, "kind": getattr(found, "kind", "aborts"),
                           "message": getattr(found, "message", None) or str(error),
                           "explanation": known.explanation if known else "", "remedy": known.remedy if known else "",
                           "went_on": bool(self.raises_for_aborts), "predicted": bool(self.predicted)})

    def known_error(self, exc: BaseException):
        """Map a device error to a one-line explanation, or ``None``."""
        from dmlprof.backends.errors import explain_device_error

        return explain_device_error(exc, self)


class UnrecordedAbort(RuntimeError):
    """An abort a device raised in a call's place where nothing recorded the call, read from its note
    (:meth:`Backend.take_abort_note`): the device's words (so it is judged as a recorded one is), the op, and where
    it was raised (:attr:`where`)."""

    def __init__(self, note, run_thread: Optional[int] = None):
        from dmlprof.directml.failures import ABORT_PREFIX

        super().__init__(note.message or f"{ABORT_PREFIX} (SIGABRT): a call the device aborts")
        self.op = note.op or "a call"
        self.where = _unrecorded_where(note, run_thread)


def _unrecorded_where(note, run_thread: Optional[int] = None) -> str:
    """Where nothing recorded the call, in words: another process (a forked DataLoader worker), another thread
    than the run's (``run_thread``, a native id: the reading thread's by default), or the run's (a step nothing
    records: a warm-up step, one past the recorded steps)."""
    import threading

    if note.pid and note.pid != os.getpid():
        return f"in forked process {note.pid}, a DataLoader worker say, which nothing records"
    if note.thread and note.thread != (run_thread or threading.get_native_id()):
        return "in another thread than the run's, which nothing records"
    return "in a step nothing recorded, a warm-up step or one past the recorded ones"


def refused_in_place(error: BaseException, backend: Backend) -> BaseException:
    """What is raised in place of a call that would end the process: :class:`~dmlprof.errors.CallRefused`,
    which no ``except Exception`` in the user's code swallows; the backend keeps the first one."""
    from dmlprof.errors import CallRefused

    refusal = CallRefused(error)
    if backend.first_refusal is None:
        backend.first_refusal = refusal
    return refusal


def _or_default(fn, default):
    """What ``fn()`` says, or ``default`` where asking fails (a device that cannot name itself still runs)."""
    try:
        return fn()
    except Exception:
        return default
