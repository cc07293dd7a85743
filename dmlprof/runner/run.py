"""What every run of the user's code shares: its facts, the guard around each piece of the user's
code (an error becomes one line, a stop keeps the partial session), and the recording's stretch.

:class:`Run` is the base of the contract run (:mod:`~dmlprof.runner.contract`) and the script run
(:mod:`~dmlprof.runner.script`); ``dmlprof.profile`` uses it as is. The Session is assembled by
:mod:`~dmlprof.runner.assembly`.
"""
from __future__ import annotations

import gc
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Optional

import torch

from dmlprof import interrupts, progress
from dmlprof.backends import Backend
from dmlprof.errors import CallRefused, DeviceError, DmlprofError, ModelRaisedError, NotPredicted
from dmlprof.facts import RunFacts, run_facts
from dmlprof.model_file import describe_exception, printable
from dmlprof.record.attribution import raised_at
from dmlprof.record.journal import process_journal
from dmlprof.record.profiler import PROFILED_CALLS_MAX, ProfilerAlongside
from dmlprof.record import budget
from dmlprof.record.recorder import Recorder
from dmlprof.runner.assembly import assemble
from dmlprof.runner import user_code
from dmlprof.runner.user_code import HardExit, exit_call
from dmlprof.session import Session


#: torch.profiler also keeps each call's tensors' shapes: about 70 bytes a tensor beside its 35 KB a call
#: (measured: torch.cat of 500 tensors, 75 KB a call once its events are read). It stops once the recorder's
#: rows hold this many bytes of records (about 180 a tensor), which caps that part near 100 MB
PROFILED_RECORD_BYTES_MAX = 256 * 2**20


class ScanStopped(DmlprofError):
    """A scan that stopped early; ``session`` holds what was recorded."""

    def __init__(self, cause: DmlprofError, session: Session):
        super().__init__(str(cause), remedy=cause.remedy)
        self.exit_code = cause.exit_code
        self.session = session
        self.cause = cause



class Recording:
    """A stretch of the run under record: a capture (the recorder, or a warning capture) inside
    torch.profiler, entered together and closed once, capture first, however the stretch ends
    (``close()`` early to build a partial session from what was recorded)."""

    def __init__(self, capture, profiler: ProfilerAlongside, facts: Optional[RunFacts] = None):
        self.capture, self.profiler = capture, profiler
        #: the run's facts so far: a journaled recording starts with them (what a crash's partial session holds)
        self.facts = facts
        self._closed = False

    def __enter__(self) -> "Recording":
        self.profiler.__enter__()
        try:
            self.capture.__enter__()
        except BaseException:
            self.profiler.__exit__(None, None, None)
            raise
        if isinstance(self.capture, Recorder):  # the profiler's cost is bounded by the calls it sees
            journal_calls(self.capture, self.facts)
            rows = self.capture.rows
            self.profiler.calls_so_far = lambda: len(rows)
            self.capture.when_rows_reach(PROFILED_CALLS_MAX, self._profiler_full, PROFILED_RECORD_BYTES_MAX)
        return self

    def _profiler_full(self) -> None:
        if not self.profiler.stop_early(f"it stops past {PROFILED_CALLS_MAX:,} calls, at about 35 KB a call, or "
                                        "sooner for calls of many tensors"):
            # reached on another thread (autograd's, on a GPU): the thread that started it stops it soon after
            self.capture.when_rows_reach(len(self.capture.rows) + 100, self._profiler_full,
                                         self.capture.held_bytes + 100 * budget.ROW_BYTES)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.capture.__exit__(None, None, None)
            finally:
                self.profiler.__exit__(None, None, None)

    def __exit__(self, *exc) -> bool:
        self.close()
        return False


def journal_calls(recorder: Recorder, facts: Optional[RunFacts]) -> None:
    """Where a scan's parent asked for it, each call is written down as it happens (:mod:`dmlprof.survival`):
    the run's facts so far first, what a crash's partial session starts from."""
    journal = process_journal()
    if journal is None:
        return
    from dmlprof.schema import empty_ops_frame

    journal.header(Session(meta=(facts or RunFacts()).build(), ops=empty_ops_frame()).to_json())
    recorder.journal = journal


class StepCalls:
    """The calls of the step under way, read from a running count (``total()``) by a progress bar's clock
    thread; :meth:`step_begins` marks where the next step's calls start."""

    def __init__(self, total: Callable[[], int]):
        self.total = total
        self.start = 0

    def step_begins(self) -> None:
        self.start = self.total()

    def __call__(self) -> int:
        return max(0, self.total() - self.start)


class Run:
    """One run of the user's code under record: its facts (``facts``, typed as they are set) and what it
    measured, the guard around the user's code, and the Session it ends with."""

    def __init__(self, path: Path, backend: Backend, *, sync: bool, profiler: bool, run_mode: str,
                 verify: bool = False):
        self.path = path
        self.verify = verify
        self.verifier = None
        self.backend = backend
        self.sync = sync
        self.profiler_enabled = profiler
        self.run_mode = run_mode
        #: the run's facts, gathered as it goes (RunMeta's fields, typed as they are set)
        self.facts = live_facts(path, backend, run_mode=run_mode, sync=sync)
        self.facts.set_recording(profiler=profiler, verify=True if verify else None)
        backend.first_refusal = None  # this run's refusals only (a backend may serve a scan twice: --replace)
        backend.forget_noted_aborts()
        #: the run ended at a call refused in place (then the calls recorded after it are not kept)
        self.ended_by_refusal = False
        self.step_times_ms: list = []  # the recorded (or profiled) measured steps
        self.unrecorded_step_times_ms: list = []  # steps nothing recorded or profiled, run beside them
        #: every step's loss, checked for NaN/inf once recording is over (never during a step)
        self.losses: list = []
        #: the rows of the recording under way (how much a Ctrl-C has to save)
        self.live_rows: list = []
        self.interrupted = False
        #: the exception that stopped the run, as the user's code or the device raised it
        self.raised: Optional[BaseException] = None
        #: address space set aside, given back when the memory runs out (enough to say so and save the session)
        self.reserve = budget.set_aside()
        #: training steps (or a script's optimizer steps) ended so far, warm-up included
        self.steps_ended = 0

    def _follow_calls(self, bar: progress.Phase, calls: "StepCalls",
                      steps_ended: Optional[Callable[[], int]] = None) -> "StepCalls":
        """``bar`` shows the calls of the step under way: a first step that runs for minutes (real DirectML
        compiling its shaders) shows how far it got, and, until a step has ended, the backend's note of why."""
        note = self.backend.first_step_note
        steps_ended = steps_ended or (lambda: self.steps_ended)

        def text() -> str:
            said = f"{calls():,} calls"
            return f"{said} ({note})" if note and not steps_ended() else said

        bar.follow(text)
        return calls

    @contextmanager
    def _processing(self):
        """The phase after the steps: the profiler stops and its events are read, each call is judged.
        Signals wait meanwhile: what was recorded is being saved (dmlprof.interrupts)."""
        with interrupts.saving(), progress.phase("processing the trace" if self.profiler_enabled
                                                 else "processing the calls"):
            yield

    def _new_verifier(self, model):
        if not self.verify:
            return None
        from dmlprof.verify import Verifier

        self.verifier = Verifier(self.backend)
        if model is not None:
            self.verifier.name_parameters(model)
        return self.verifier

    def _user_call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except CallRefused as refusal:  # a call that would end the process on the device
            self.raised = refusal.error
            raise self._explain(refusal.error, what) from None
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or SIGHUP (dmlprof.interrupts)
            user_code.cut_short = "stopped"  # a `kill` of the scan must not then wait on the script's threads
            # nothing was recorded yet, so no session is written: say so, as a later Ctrl-C names what it saved
            raise interrupts.cause_of(stop, "interrupted before any step ran: nothing was recorded, so nothing was saved") from None
        except (SystemExit, HardExit) as exc:  # BaseExceptions: a silent exit would look like success
            raise ModelRaisedError(f"{what} called {exit_call(exc)} before any step ran") from None
        except DmlprofError:
            raise
        except Exception as exc:
            said = printable(exc)  # its message is read from here on, down the chain of causes too
            raise self._explain(said, what) from said

    def _explain(self, exc: BaseException, what: str) -> DmlprofError:
        known = self.backend.known_error(exc)
        at = raised_at(exc)  # the user's line, so nobody has to run the script again without dmlprof to find it
        # a failure inside torch.cuda itself under --from cuda (an event, a stream: left to torch) is named so; the
        # known "asks for CUDA" error (a CUDA build without a driver) would advise the --from cuda already given
        unmapped = None
        if self.facts.remapped_from:
            from dmlprof.backends.remap import unmapped_note

            unmapped = unmapped_note(exc, self.facts.remapped_from)
        if known is not None and getattr(known, "not_predicted", False):  # the prediction stops: no verdict
            return NotPredicted(f"{what}: {known.explanation}" + (f" (at {at})" if at else ""), remedy=known.remedy)
        if known is not None and unmapped is None:  # explained, and located as an unknown error is (the autocast
            # refusal named no line)
            return DeviceError(f"{what}: {known.explanation}" + (f" (at {at})" if at else ""), remedy=known.remedy)
        remedy = unmapped
        if self.run_mode == "script" and not self.facts.remapped_from:
            # A script that checks for its own device ("assert torch.cuda.is_available()") fails in
            # its own words; where it names a device this scan does not have, say how to scan it.
            hint = remap_hint(self.path)
            if hint and hint.split()[-1] != self.backend.name:
                remedy = f"if the script fails for want of {hint.split()[-1]}, scan it with {hint}"
        return ModelRaisedError(f"{what} raised {describe_exception(exc)}" + (f" (at {at})" if at else ""), remedy=remedy)

    def _guarded(self, body, *, finish=None, recorded_whole=None):
        """Run ``body``; on Ctrl-C or an error raise one line, with ``finish()``'s partial session if given
        (``recorded_whole()``: whether every recorded step was taken, so that a stop after them keeps a whole one)."""
        where = f"step {len(self.step_times_ms) + 1}" if self.run_mode == "contract" else self.path.name
        completed, stopped_by = False, None
        try:
            self._noticing_aborts(body)
        except CallRefused as refusal:  # a call that would end the process on the device: the run ends here
            user_code.cut_short = "stopped"  # as the device would have ended it: its threads must not hold it
            self.raised, self.ended_by_refusal = refusal.error, True
            cause: DmlprofError = self._explain(refusal.error, where)
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or SIGHUP (dmlprof.interrupts)
            user_code.cut_short = "stopped"  # a `kill` of the scan must not then wait on the script's threads
            stopped_by = str(interrupts.cause_of(stop))  # "interrupted", "stopped by SIGTERM"
            # with nothing to finish (a warm-up step) no session is written: the line says so
            cause = interrupts.cause_of(stop, "interrupted" if finish is not None else
                                        "interrupted before any step was recorded: nothing was saved")
        except (SystemExit, HardExit) as exc:  # from a contract step (a script's own exit is handled in script())
            cause = ModelRaisedError(f"{where} called {exit_call(exc)}")
        except ModelRaisedError as exc:
            cause = exc
        except DmlprofError:
            raise
        except MemoryError as exc:  # what was set aside lets the error be said and what was recorded be saved
            budget.give_back(self.reserve)
            self.reserve = None
            cause = self._explain(exc, where)
            self.raised = exc
            traceback.clear_frames(exc.__traceback__)  # the script's finished frames hold what filled the memory
        except Exception as exc:
            self.raised = exc = printable(exc)  # its message is read from here on
            cause = self._explain(exc, where)
        else:
            if self.backend.first_refusal is None:
                return
            completed = True
            cause = self._caught_refusal(where)
        if self.backend.first_refusal is not None and self.raised is not self.backend.first_refusal.error:
            # the user's code caught a refusal (``except BaseException``) and went on, to fail, to be stopped by a
            # signal (a scheduler's SIGTERM, re-probe 15 case 17) or not: on the device the process had ended at
            # the refused call, so that is how this run ends
            cause = self._caught_refusal(where)
            if stopped_by is not None:
                self.facts.note(f"{stopped_by} after the refused call: on DirectML the process had ended at it")
        self.backend.first_refusal = None  # said: the run ends here (a failed warm-up step is taken again, recorded)
        if finish is None:  # warming up, or nothing recorded yet: nothing to keep
            raise cause
        # a device that raised in place of the process's end, caught by the code, recorded the run to its end:
        # whole, not partial, its finding the call where DirectML's process ends (DeviceFailure.calls_after)
        whole = completed and self.backend.raises_for_aborts
        if stopped_by is not None and recorded_whole is not None and recorded_whole():
            # a scheduler's SIGTERM or a `kill` past the recorded steps (a --run-to-end script): the recording is
            # whole, only the script's end is not (re-probe 16, case 30)
            whole = True
            self.facts.note(f"{stopped_by} after its recorded steps")
        self.facts.set(partial=not whole, partial_reason=str(cause.one_line()))
        if stopped_by is not None:
            # Ctrl-C: saving a long recording takes a while; say so, and let no second Ctrl-C lose it
            self.interrupted = True
            with interrupts.saving():
                interrupts.announce(len(self.live_rows))
                session = finish()
        else:
            session = finish()
        if session.ops.empty:  # failed before any call was recorded: an empty session would keep nothing
            raise cause
        failed = session.meta.failed_op
        if failed and failed not in str(cause):
            # Which call failed, and the user's line that made it (or, inside a library's code that the
            # training step called, the module that made it: "in Sequential.1 (Linear)").
            where = session.meta.failed_source or ""
            text = str(cause)
            if where and text.endswith(f" (at {where})"):  # the line _explain found: the call joins it
                text = text[: -len(f" (at {where})")]
            where = where or _module_named(session.meta.failed_module, session.meta.module_classes)
            located = type(cause)(f"{text} (at {failed}{', ' + where if where else ''})", remedy=cause.remedy)
            located.exit_code, cause = cause.exit_code, located  # SIGTERM's 143 is the instance's own
            session.meta = session.meta.updated(partial_reason=cause.one_line())
        raise ScanStopped(cause, session)

    def _noticing_aborts(self, body) -> None:
        """``body()``, then the device's note of aborts it raised where nothing recorded (another thread, a forked
        worker, a step nothing records) is read: the first is the run's finding, as a recorded one is."""
        try:
            body()
        except BaseException as exc:
            self.backend.notice_unrecorded_aborts(exc)
            raise
        self.backend.notice_unrecorded_aborts()

    def _caught_refusal(self, where: str) -> DmlprofError:
        """The error of the first refused call, which the user's code caught and ran past."""
        self.raised, self.ended_by_refusal = self.backend.first_refusal.error, True
        cause = self._explain(self.raised, where)
        what = ("dmlprof's refusal" if not self.backend.raises_for_aborts else "the prediction's error in its place"
                if self.backend.predicted else "the emulated device's error in its place")
        text, located, at = str(cause).rpartition(" (at ")
        text, at = (text, located + at) if located and at.endswith(")") else (str(cause), "")
        went_on = f"the code caught {what} and went on"
        unrecorded = getattr(self.raised, "where", None)  # read from the device's note: no line, no recorded call
        if unrecorded:  # caught there, or the thread it ended was not the run's: either way the run went on
            raiser = "the prediction" if self.backend.predicted else "the emulated device"
            went_on, at = f"{raiser} raised its error in its place {unrecorded}, and the run went on", \
                f" (at {self.raised.op})"
        # the user's line stays at the end, where the failing call joins it: "(at aten::_fft_r2c, train.py:8)"
        caught = type(cause)(f"{text}; {went_on}, but on DirectML the process ends at this call{at}",
                             remedy=cause.remedy)
        caught.exit_code = cause.exit_code
        return caught

    def _finish(self, recorder: Recorder, profiler: Optional[ProfilerAlongside], *, ops=None, events=None) -> Session:
        """The Session of what was recorded (:func:`~dmlprof.runner.assembly.assemble`)."""
        refused_row = getattr(recorder, "refused_row", None)
        went_on = self.ended_by_refusal and self.backend.raises_for_aborts
        if self.ended_by_refusal and refused_row is not None:
            if not went_on:  # the calls after a refused one never run on the device (the process ends there)
                del recorder.rows[refused_row + 1:]
            # else the device ran them (its error was caught): kept, and counted in the finding; a replay of
            # independent samples (tests/opinfo/truth_replay.py) reads each sample's calls past another's abort
            recorder.failed_row = refused_row
        if getattr(self.raised, "where", None):  # an abort nothing recorded: no recorded call is the finding
            if self.ended_by_refusal:  # a later failure of the code's own came after the process had ended
                recorder.failed_row = None
            if self.facts.device_failure is None:
                self.facts.set(device_failure=unrecorded_failure(self.raised, self.backend))
        facts = self.facts.copy()
        while True:
            try:
                return assemble(recorder, profiler, self.backend, self.facts, losses=self.losses,
                                step_times_ms=self.step_times_ms, verifier=self.verifier, raised=self.raised,
                                interrupted=self.interrupted, ops=ops, events=events, went_on=went_on)
            except MemoryError:  # what was recorded filled the memory: save its first half, then a quarter...
                if ops is not None or len(recorder.rows) < 2:
                    raise
                profiler = None  # torch.profiler's events are given up first
                kept = len(recorder.rows) // 2
                del recorder.rows[kept:]
                if recorder.failed_row is not None and recorder.failed_row >= kept:
                    recorder.failed_row = None
                gc.collect()
                self.facts = facts.copy()
                self.facts.note(f"the memory ran out as the session was built: it holds the first {kept:,} recorded "
                                "calls only, without torch.profiler's cross-check")


def unrecorded_failure(raised: BaseException, backend: Backend):
    """The finding of an abort the device raised where nothing recorded the call (its note: ``raised.op``,
    ``raised.where``), so that the report, a target's verdict and ``check`` lead with it as with a recorded one; the
    code went on past it (``calls_after``: none of the recorded calls is known to come after it)."""
    from dmlprof.meta import DeviceFailure

    found = backend.failure_in(raised)
    known = backend.known_error(raised)
    return DeviceFailure(op=f"{raised.op}, {raised.where}", kind=found.kind if found else "aborts",
                         message=found.message if found else str(raised), explanation=known.explanation if known else "",
                         remedy=known.remedy if known else "", observed=not backend.predicted, calls_after=0)


def _module_named(path: Optional[str], classes) -> str:
    """``in Sequential.1 (Linear)``: a module's path and what it is ("" for none)."""
    if not path:
        return ""
    kind = classes.get(path) if classes else None
    return f"in {path}" + (f" ({kind})" if kind and kind != path.rsplit(".", 1)[-1] else "")


def live_facts(path: Path, backend: Backend, *, run_mode: str, sync: bool) -> RunFacts:
    """The facts a run of ``path`` on ``backend`` starts with (what a rank's snapshot keeps too): the
    backend's own record says the device, and whether the run is a prediction."""
    on = backend.run_meta()
    facts = run_facts(path, kind=on.kind, run_mode=run_mode, torch_version=torch.__version__)
    facts.set(device=on.device, prediction=on.prediction)
    facts.set_recording(sync=bool(sync and backend.is_accelerator()), timing=on.timing or _timing_note(backend, sync))
    return facts


def _timing_note(backend: Backend, sync: bool) -> str:
    if not backend.is_accelerator():
        return "wall time per call on the CPU"
    if sync:
        return "wall time per call, device synchronised after each call"
    return "host-side time per call (--no-sync): device work may finish later and be billed to another call"


def remap_hint(path: Path) -> str:
    """Which --from would put a script's work on the scanned device, read from its source."""
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for device in ("cuda", "mps"):
        if f"{device}" in source:
            return f"--from {device}"
    return ""
