"""The contract run: a model file's training step taken as warm-up steps, then measured steps of
forward + loss + backward + optimizer step, each call recorded with its phase.

Every measured step goes through the dispatcher when the times must be exact (per-call sync, no
profiler, ``--verify``); otherwise one structure step is recorded and the measured steps are timed
by torch.profiler alone and lined up with it (:mod:`dmlprof.record.steady`). Either way, as many
steps again run after recording with nothing watching them: their times are the ones users read.
"""
from __future__ import annotations

import time
import warnings
from typing import Optional

import pandas as pd
import torch

from dmlprof import progress
from dmlprof.backends.base import FALLBACK_WARNING
from dmlprof.errors import DeviceError, DmlprofError, Interrupted, ModelRaisedError
from dmlprof.meta import SteadyState
from dmlprof.record import steady
from dmlprof.record.journal import process_journal
from dmlprof.record.profiler import ProfilerAlongside, numbered_ranges
from dmlprof.record.recorder import Recorder, refusals
from dmlprof.record.warning_capture import WarningCapture
from dmlprof.runner.run import Recording, Run, ScanStopped, StepCalls, journal_calls, unrecorded_failure
from dmlprof.runner.training_step import TrainingStep
from dmlprof.session import Session


class ContractRun(Run):
    """A model file's run (``run_mode`` "contract")."""

    def run(self, *, batch_size, steps: int, warmup: int, training: Optional[TrainingStep] = None,
            prepare=None) -> Session:
        training = training or TrainingStep.from_file(self.path, self.backend, batch_size, call=self._user_call)
        if prepare is not None:
            prepare(training)
        self.facts.set(
            batch_size=training.batch_size,
            warmup_steps=warmup,
            steps_requested=steps,
            steps=0,
            optimizer=type(training.optimizer).__name__,
            loss_fn=training.loss_name,
            parameters=sum(p.numel() for p in training.model.parameters()),
        )
        start = time.perf_counter()
        failed = self._warm_up(training, warmup)
        self.backend.reset_peak_memory()
        if failed is not None:
            # The step is taken again under the recorder, so the session shows the call that
            # fails and who asked for it rather than only the error.
            self.facts.note("the warm-up step failed; the step was taken again, recorded, to show the call that fails")
            session = self._record_every_step(training, 1)
            if self.ended_by_refusal:
                # the warm-up's code caught a refused call and kept its answer (a capability check asked once):
                # the retake ran clean, but on DirectML the process had ended in that warm-up step
                session.meta = session.meta.updated(partial=True, partial_reason=failed.one_line(),
                                                    device_failure=self._warm_up_refusal(session))
                raise ScanStopped(failed, session)
        elif self.sync or not self.profiler_enabled or self.verify:  # --verify checks every call
            session = self._record_every_step(training, steps)
        else:
            session = self._record_steady_state(training, steps)
        session.meta = session.meta.updated(duration_s=round(time.perf_counter() - start, 3))
        return session

    def _warm_up_refusal(self, session: Session):
        """The finding of a refusal the warm-up's code caught (the call itself was not recorded: warm-up steps are
        not), so that the report, a target's verdict and ``check`` lead with it as with a recorded one."""
        from dmlprof.meta import DeviceFailure
        from dmlprof.record.attribution import raised_at

        if getattr(self.raised, "where", None):  # read from the device's note: it names the call and where it ran
            return unrecorded_failure(self.raised, self.backend)
        found = self.backend.failure_in(self.raised) if self.raised is not None else None
        if found is None:
            return session.meta.device_failure
        known = self.backend.known_error(self.raised)
        return DeviceFailure(op="a call of the warm-up step", kind=found.kind, message=found.message,
                             source=raised_at(self.raised) or "", explanation=known.explanation if known else "",
                             remedy=known.remedy if known else "", observed=not self.backend.predicted)

    def _warm_up(self, training: TrainingStep, warmup: int) -> Optional[DmlprofError]:
        """Unrecorded steps; the error of one that failed (Ctrl-C is raised at once)."""
        if not warmup:
            return None
        with warnings.catch_warnings():
            # Fallback warnings print once per process; the measured steps record them call by call.
            warnings.filterwarnings("ignore", message=FALLBACK_WARNING.pattern)
            with progress.phase("warm-up", total=warmup) as bar, \
                    refusals(self.backend, counted=progress.drawn()) as guard:
                # nothing records a warm-up step, but the tap guarding it sees its calls: a long first step
                # shows them on its bar
                calls = self._follow_calls(bar, StepCalls(lambda: guard.calls)) if guard is not None else None
                for _ in range(warmup):
                    if calls is not None:
                        calls.step_begins()
                    # Ops an extension defined since the run began (torchvision's, imported with the
                    # model file): the recorder covers them for measured steps, this for warm-up ones.
                    self.backend.refresh()
                    try:
                        self._guarded(lambda: self._timed_step(training, None))
                    except (DeviceError, ModelRaisedError) as exc:
                        return exc
                    bar.advance()
        return None

    def _record_every_step(self, training: TrainingStep, steps: int) -> Session:
        """Every measured step through the dispatch mode (exact, per-call sync possible)."""
        self.facts.set_recording(description="every call of every measured step through the dispatcher")
        recorder = Recorder(self.backend, sync=self.sync, verifier=self._new_verifier(training.model))
        recorder.modules.name_tree(training.model)
        self.live_rows = recorder.rows
        profiler = ProfilerAlongside(self.backend, enabled=self.profiler_enabled)

        def finish():
            with self._processing():
                recording.close()
                return self._finish(recorder, profiler)

        with Recording(recorder, profiler, facts=self.facts) as recording:
            with progress.phase("verified steps" if self.verify else "steps", total=steps) as bar:
                calls = self._follow_calls(bar, StepCalls(lambda: len(recorder.rows)))
                for step in range(steps):
                    calls.step_begins()
                    recorder.step = step
                    recorder.modules.reset_nodes()
                    self._guarded(lambda: self._timed_step(training, recorder, keep_time=True), finish=finish)
                    self.facts.set(steps=step + 1)
                    bar.advance()
            session = finish()  # inside: stopping the profiler is part of the processing shown
        if self.backend.is_accelerator():  # per-call recording and syncs slow a launch-bound step down
            self._report_unrecorded_step_time(session, training, steps)
        return session

    def _record_steady_state(self, training: TrainingStep, steps: int) -> Session:
        """One structure step through the dispatch mode; measured steps timed by torch.profiler alone.

        See dmlprof/record/steady.py. Falls back to recording every step when
        the structure step's trace cannot be lined up with its calls.
        """
        recorder = Recorder(self.backend, sync=False)
        recorder.modules.name_tree(training.model)
        journal_calls(recorder, self.facts)
        structure_profiler = ProfilerAlongside(self.backend)
        with progress.phase("structure step", total=1) as bar:
            self._follow_calls(bar, StepCalls(lambda: len(recorder.rows)))
            with structure_profiler:
                with recorder:
                    with torch.profiler.record_function(f"{steady.STEP_RANGE}0"):
                        started = time.perf_counter_ns()
                        self._guarded(lambda: self._timed_step(training, recorder))
                        self.facts.set_recording(structure_step_ms=round((time.perf_counter_ns() - started) / 1e6, 3))
            template = recorder.frame()
            structure = steady.Structure.from_template(template, structure_profiler.op_events())
            bar.advance()
        if structure is None:
            self.facts.note("the structure step's trace did not line up with its calls; every step was recorded instead")
            return self._record_every_step(training, steps)
        self.facts.set_recording(description=(
            "one structure step through the dispatcher; measured steps timed per call by torch.profiler "
            "and aligned with it by op name (--no-sync)"))
        warnings = WarningCapture()
        profiler = ProfilerAlongside(self.backend)
        step_warnings = []

        def finish():
            with self._processing():
                recording.close()
                return self._finish_steady(structure, profiler, step_warnings, recorder)

        with Recording(warnings, profiler) as recording:
            with progress.phase("steps", total=steps) as bar:
                for step in range(steps):
                    first = len(warnings.messages)
                    with torch.profiler.record_function(f"{steady.STEP_RANGE}{step}"):
                        self._guarded(lambda: self._timed_step(training, None, keep_time=True), finish=finish)
                    step_warnings.append(warnings.messages[first:])
                    self.facts.set(steps=step + 1)
                    bar.advance()
            session = finish()  # inside: stopping the profiler is part of the processing shown
        # The profiler inflates a launch-bound step by a third or more (H200: 1.35x ResNet-18 bs 8,
        # 1.57x LeNet-5). (Pausing it between steps instead costs about 1 ms a resume: LeNet's
        # profiled steps took 1.40x a profiler-only step.)
        self._report_unrecorded_step_time(session, training, steps)
        return session

    def _report_unrecorded_step_time(self, session: Session, training: TrainingStep, steps: int) -> None:
        """The step time users read: as many steps as were measured, run after recording stopped,
        with nothing recording or profiling them (a prediction has no times; --verify's steps are
        checked ones; a partial run stops where it broke). Not on a DirectML stand-in: its times are
        host-CPU times, and its fallback counters must hold the recorded steps alone."""
        if self.facts.partial or self.verify or self.backend.stands_in_for_directml or self.backend.predicted:
            return
        try:
            with progress.phase("unrecorded steps", total=steps) as bar:
                for _ in range(steps):
                    self._guarded(lambda: self._timed_step(training, None, keep_time="unrecorded"))
                    bar.advance()
        except Interrupted as stop:
            # the recording is whole: a Ctrl-C while the step is timed unrecorded must not lose it
            said = Interrupted(f"{stop} while the recorded steps were timed again unrecorded: the recording is whole, "
                               "its step time the recorded steps'")
            said.exit_code = stop.exit_code  # SIGTERM's 143, Ctrl-C's 130
            session.meta = session.meta.updated(partial=True, partial_reason=said.one_line())
            raise ScanStopped(said, session) from None
        session.meta = session.meta.updated(**self._step_time_facts())

    def _step_time_facts(self) -> dict:
        """The step time users read is an unrecorded step's; the recorded steps' own times are kept beside it."""
        if not self.unrecorded_step_times_ms:
            return {}
        return {"step_times_ms": tuple(round(t, 3) for t in self.unrecorded_step_times_ms),
                "recorded_step_times_ms": tuple(round(t, 3) for t in self.step_times_ms)}

    def _finish_steady(self, structure, profiler, step_warnings: list, recorder: Recorder) -> Session:
        events = profiler.op_events()
        windows = steady.step_windows(events)
        frames, unmatched, mismatched, unmatched_calls = [], [], [], 0
        origin = min((w[0] for w in windows.values()), default=0)
        for step, window in sorted(windows.items()):
            if step >= len(step_warnings):
                continue  # the step that was interrupted
            frame = structure.apply(events, window, step, origin)
            if frame is None:
                unmatched.append(step)
                continue
            unmatched_calls += frame.attrs.get("unmatched_calls", 0)
            names = [self.backend.fallback_ops_in(m) for m in step_warnings[step]]
            if not structure.fallbacks_match([n for n in names if n]):
                mismatched.append(step)
            frames.append(frame)
        ops = pd.concat(frames, ignore_index=True) if frames else structure.template.iloc[0:0].copy()
        ops["seq"] = range(len(ops))
        ops["ranges"] = numbered_ranges(ops["ranges"].tolist() if frames else [])
        self.facts.set_recording(steady_state=SteadyState(
            structure_step_calls=len(structure.template), matched_steps=len(frames), unmatched_steps=tuple(unmatched),
            fallback_mismatch_steps=tuple(mismatched), calls_timed_from_structure_step=unmatched_calls))
        if unmatched or mismatched:
            self.facts.note(
                f"steps {unmatched + mismatched} differed from the structure step and are "
                + ("left out" if unmatched else "kept, but their fallbacks differed")
                + "; scan without --no-sync to record every call of every step"
            )
        return self._finish(recorder, profiler, ops=ops, events=events)

    def _timed_step(self, training: TrainingStep, recorder, keep_time: bool = False):
        started = time.perf_counter_ns()
        loss = training.run(recorder)
        if isinstance(loss, torch.Tensor):
            self.losses.append(loss)  # kept as is: a detach() here would be a call in the recording
        if recorder is not None:
            recorder.active = False  # the closing sync is ours, not the model's
        try:
            self.backend.synchronize([loss])
        finally:
            if recorder is not None:
                recorder.active = True
        self.steps_ended += 1
        if keep_time:
            elapsed_ns = time.perf_counter_ns() - started
            if keep_time != "unrecorded":
                self.step_times_ms.append(elapsed_ns / 1e6)
                journal = process_journal()
                if journal is not None:  # a process the step's code ends later keeps the steps' times
                    journal.step_time(elapsed_ns)
            else:
                self.unrecorded_step_times_ms.append(elapsed_ns / 1e6)

