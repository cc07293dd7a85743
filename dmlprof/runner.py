"""Runs a model file's training step (or a whole script) under the recorder.

Contract mode: warm-up steps, then measured steps of forward + loss + backward
+ optimizer step, each op call recorded with its phase. Script mode: the file
runs as ``__main__`` with its own argv, recorded from start to end, phases
inferred. Either way the result is a :class:`~dmlprof.session.Session`; when a
run stops early (Ctrl-C, the model raises) the error carries the partial
session, which says it is partial.
"""
from __future__ import annotations

import bisect

import itertools
import operator
import os
import runpy
import sys
import threading
import time
import warnings
from collections import Counter
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from dmlprof.backends import Backend, resolve_backend
from dmlprof.backends.base import FALLBACK_WARNING
from dmlprof import interrupts, progress
from dmlprof.distributed.annotate import annotate as annotate_distributed
from dmlprof.errors import DeviceError, DmlprofError, Interrupted, ModelFileError, ModelRaisedError, UsageError
from dmlprof.meta import LIVE, DeviceUnused, run_facts
from dmlprof.model_file import describe_exception, import_model_module, inspect_model_file
import pandas as pd

from dmlprof.record import steady
from dmlprof.record.attribution import raised_at
from dmlprof.record.forks import forked_child_ends_here
from dmlprof.record.frame import rows_to_frame
from dmlprof.record.profiler import PROFILED_CALLS_MAX, ProfilerAlongside, join_call_events, numbered_ranges, profiler_op_totals
from dmlprof.record.recorder import Recorder, refusals
from dmlprof.record.window import StepWindow, WindowClosed
from dmlprof.record.warning_capture import WarningCapture
from dmlprof.session import Session

DEFAULT_BATCH_SIZE = 16
DEFAULT_STEPS = 3
DEFAULT_WARMUP = 1


class ScanStopped(DmlprofError):
    """A scan that stopped early; ``session`` holds what was recorded."""

    def __init__(self, cause: DmlprofError, session: Session):
        super().__init__(str(cause), remedy=cause.remedy)
        self.exit_code = cause.exit_code
        self.session = session
        self.cause = cause


class HardExit(BaseException):
    """``os._exit(code)`` called by the model or script while dmlprof ran it.

    ``os._exit`` ends the process on the spot (no ``finally``, no atexit), so
    the recording would be lost; during a scan it raises this instead (in the
    scanning process's main thread only: forked children and other threads
    still exit for real), and the scan ends as if the code had returned there.
    """

    def __init__(self, code: int):
        super().__init__(f"os._exit({code})")
        self.code = code


def _exit_call(exc: BaseException) -> str:
    """``sys.exit(2)`` / ``os._exit(0)``: how the user's code asked to end the process."""
    if isinstance(exc, HardExit):
        return f"os._exit({exc.code})"
    return f"sys.exit({exc.code!r})" if exc.code is not None else "sys.exit()"


@contextmanager
def _hard_exit_trapped():
    real_exit, pid = os._exit, os.getpid()

    def trapped(code):
        if os.getpid() != pid or threading.current_thread() is not threading.main_thread():
            real_exit(code)
        raise HardExit(code)

    os._exit = trapped
    try:
        yield
    finally:
        os._exit = real_exit


@contextmanager
def _cwd_kept():
    """The user's code may ``os.chdir``; dmlprof's outputs stay relative to where it was started."""
    try:
        start = os.getcwd()
    except OSError:  # started in a folder that no longer exists: nothing to come back to
        yield
        return
    try:
        yield
    finally:
        try:
            os.chdir(start)
        except OSError:
            pass


@contextmanager
def _streams_kept():
    """The user's code may replace ``sys.stdout``/``sys.stderr`` (a script that logs to a file) or close
    them; dmlprof's report goes to the streams it was started with, reopened if they were closed."""
    saved = sys.stdout, sys.stderr
    try:
        yield
    finally:
        sys.stdout, sys.stderr = (_open_again(stream, fd) for stream, fd in zip(saved, (1, 2)))


def _open_again(stream, fd: int):
    """``stream`` or, when the user's code closed it, a new text stream on its descriptor."""
    if stream is not None and not getattr(stream, "closed", False):
        return stream
    try:
        return open(fd, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)
    except (OSError, ValueError):
        return open(os.devnull, "w", encoding="utf-8")


def default_loss(output, target):
    """Cross-entropy for integer targets, mean squared error otherwise."""
    if isinstance(output, (tuple, list)):
        output = output[0]
    if not target.is_floating_point() and not target.is_complex():
        return torch.nn.functional.cross_entropy(output, target)
    return torch.nn.functional.mse_loss(output, target)


def default_optimizer(params):
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)


def scan(
    path,
    device: str = "auto",
    *,
    batch_size: Optional[int] = None,
    steps: int = DEFAULT_STEPS,
    warmup: int = DEFAULT_WARMUP,
    sync: bool = True,
    profiler: bool = True,
    script_args: Sequence[str] = (),
    backend: Optional[Backend] = None,
    verify: bool = False,
    prepare: Optional[Callable[["TrainingStep"], None]] = None,
    run_to_end: bool = False,
    remap_from: Optional[str] = None,
    module: Optional[str] = None,
) -> Session:
    """Scan a model file (the model contract) or a script; returns the Session.

    Raises :class:`~dmlprof.errors.DmlprofError` for anything the user can fix;
    a scan that stopped part-way raises :class:`ScanStopped` whose
    ``session`` is the partial result. ``verify`` recomputes every device op
    on the CPU and checks optimizer updates land (``session.extras['verify']``,
    see docs/verify.md). ``prepare(training_step)`` may change a contract
    file's model, optimizer or loss before any step runs (``scan --replace``). ``module``: the
    script is that module, run as ``python -m module`` runs it (``path`` is its file).
    """
    if steps < 1:
        raise DmlprofError("--steps must be at least 1")
    if warmup < 0:
        raise DmlprofError("--warmup cannot be negative")
    if batch_size is not None and batch_size < 1:
        raise DmlprofError("--batch-size must be at least 1")
    model_file = inspect_model_file(path)
    backend = backend or resolve_backend(device)
    run = _Run(model_file.path, backend, sync=sync, profiler=profiler, run_mode=model_file.mode, verify=verify)
    if model_file.notes:
        run.meta["notes"] = list(model_file.notes)
    if module:
        run.meta["model_name"] = module  # a package's __main__.py is named by its package
    with backend.run_context(), _cwd_kept(), _streams_kept(), _hard_exit_trapped():
        if model_file.mode == "contract":
            return run.contract(batch_size=batch_size, steps=steps, warmup=warmup, prepare=prepare)
        if batch_size is not None:
            raise UsageError(f"--batch-size applies to model files; {model_file.path.name} is a script, "
                             "which makes its own batches")
        return run.script(script_args=list(script_args), steps=steps, warmup=warmup, run_to_end=run_to_end,
                          remap_from=remap_from, module=module)


def scan_training_step(training: "TrainingStep", backend: Backend, path, *, steps: int = DEFAULT_STEPS,
                       warmup: int = DEFAULT_WARMUP, sync: bool = True, profiler: bool = True,
                       verify: bool = False) -> Session:
    """Scan an already built :class:`TrainingStep` (what ``scan`` does after loading a file).

    Benchmarks use it to compare recording against a bare step on the very
    same model, optimizer state and allocator.
    """
    run = _Run(Path(path), backend, sync=sync, profiler=profiler, run_mode="contract", verify=verify)
    return run.contract(batch_size=training.batch_size, steps=steps, warmup=warmup, training=training)


class Recording:
    """A stretch of the run under record: a capture (the recorder, or a warning capture) inside
    torch.profiler, entered together and closed once, capture first, however the stretch ends
    (``close()`` early to build a partial session from what was recorded)."""

    def __init__(self, capture, profiler: ProfilerAlongside):
        self.capture, self.profiler = capture, profiler
        self._closed = False

    def __enter__(self) -> "Recording":
        self.profiler.__enter__()
        try:
            self.capture.__enter__()
        except BaseException:
            self.profiler.__exit__(None, None, None)
            raise
        if isinstance(self.capture, Recorder):  # the profiler's cost is bounded by the calls it sees
            rows = self.capture.rows
            self.profiler.calls_so_far = lambda: len(rows)
            self.capture.when_rows_reach(PROFILED_CALLS_MAX, self._profiler_full)
        return self

    def _profiler_full(self) -> None:
        if not self.profiler.stop_early(f"it stops past {PROFILED_CALLS_MAX:,} calls, at about 35 KB a call"):
            # reached on another thread (autograd's, on a GPU): the thread that started it stops it soon after
            self.capture.when_rows_reach(len(self.capture.rows) + 100, self._profiler_full)

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


class Profiled:
    """What ``profile()`` yields; ``session`` is filled in when the block ends."""

    session: Optional[Session] = None

    def _repr_html_(self) -> str:
        from dmlprof.render.notebook import notebook_html

        return notebook_html(self.session) if self.session is not None else "<p>dmlprof: still recording</p>"

    def table(self, top: int = 15, width: Optional[int] = None) -> str:
        """The block's report as text, as torch.profiler's ``key_averages().table()`` is read
        (:func:`dmlprof.render_text`)."""
        if self.session is None:
            raise RuntimeError("dmlprof.profile: the block is still recording; call table() after it")
        from dmlprof.render.terminal import render_text

        return render_text(self.session, top=top, width=width)


@contextmanager
def profile(device: str = "auto", *, sync: bool = True, profiler: bool = True, name: str = "block",
            backend: Optional[Backend] = None):
    """Record every op call of a block of code, as script mode records a script::

        with dmlprof.profile("dml") as run:
            loss = model(x).sum(); loss.backward(); optimizer.step()
        print(run.session.ops)

    Phases are inferred (module forwards, autograd's backward, optimizer
    steps). An exception in the block still leaves the partial session in
    ``run.session`` (marked partial) before it propagates.
    """
    backend = backend or resolve_backend(device)
    run = _Run(Path(name), backend, sync=sync, profiler=profiler, run_mode="block")
    run.meta.update(steps=0, batch_size=None, recording="every call of the block through the dispatcher")
    recorder = Recorder(backend, sync=sync)
    alongside = ProfilerAlongside(backend, enabled=profiler)
    result = Profiled()
    start = time.perf_counter()
    with Recording(recorder, alongside) as recording:
        try:
            yield result
        except BaseException as exc:
            run.meta.update(partial=True, partial_reason=describe_exception(exc))
            raise
        finally:
            recording.close()
            run.meta["duration_s"] = round(time.perf_counter() - start, 3)
            run.meta["steps"] = recorder.step
            result.session = run._finish(recorder, alongside)


def _to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=False)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def _check_batch(batch, path: Path):
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise ModelFileError(f"{path.name}: make_batch must return (inputs, target)")
    inputs, target = batch
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    for where, tensor in [("inputs", t) for t in inputs] + [("target", target)]:
        if not isinstance(tensor, torch.Tensor):
            raise ModelFileError(f"{path.name}: make_batch {where} must be tensors, got {type(tensor).__name__}")
        if tensor.device.type != "cpu":
            raise ModelFileError(
                f"{path.name}: make_batch returned {where} on {tensor.device}; "
                "the contract wants CPU tensors (dmlprof moves them to the device)"
            )
    return tuple(inputs), target


def _check_contract_names(module, path: Path) -> None:
    """The contract's functions are functions (``make_batch = 3`` is the file's mistake, not a crash)."""
    for name in ("build_model", "make_batch", "loss_fn", "make_optimizer"):
        value = getattr(module, name, None)
        if value is not None and not callable(value):
            raise ModelFileError(f"{path.name}: {name} must be a function, got {type(value).__name__}")


def _declared_batch_size(module, path: Path) -> int:
    """The file's ``BATCH_SIZE`` (default 16): a whole number of at least 1, or a contract error."""
    value = getattr(module, "BATCH_SIZE", DEFAULT_BATCH_SIZE)
    try:
        size = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        size = None
    if size is None or size < 1:
        shown = repr(value)
        raise ModelFileError(f"{path.name}: BATCH_SIZE must be a whole number of at least 1, got "
                             f"{shown if len(shown) <= 40 else shown[:37] + '...'}")
    return int(size)


class TrainingStep:
    """One training step of a contract file, ready to run on a backend's device."""

    def __init__(self, model, inputs, target, loss_fn, optimizer, device, batch_size: int, loss_name: str = "default"):
        self.model, self.inputs, self.target = model, inputs, target
        self.loss_fn, self.optimizer, self.device = loss_fn, optimizer, device
        self.batch_size, self.loss_name = batch_size, loss_name
        # A context factory around forward + loss (the sweep's --amp sets torch.autocast).
        self.autocast = nullcontext

    @classmethod
    def from_file(cls, path: Path, backend: Backend, batch_size: Optional[int] = None, call=None) -> "TrainingStep":
        """Import the contract file, build its model, batch and optimizer on the backend's device.

        ``call(label, fn, *args)`` runs each piece of user code (the runner
        passes one that turns exceptions into one-line errors).
        """
        call = call or (lambda label, fn, *args: fn(*args))
        module = import_model_module(path)
        _check_contract_names(module, path)
        batch_size = batch_size or _declared_batch_size(module, path)
        model = call("build_model()", module.build_model)
        if not isinstance(model, torch.nn.Module):
            raise ModelFileError(f"{path.name}: build_model() must return an nn.Module, got {type(model).__name__}")
        inputs, target = _check_batch(call("make_batch()", module.make_batch, batch_size), path)
        device = backend.device()
        if backend.predicted and any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers())):
            # A model built on the meta device has no values to copy; a prediction needs none.
            model = call("moving the model to the device", lambda: model.to_empty(device=device))
        else:
            model = call("moving the model to the device", model.to, device)
        model.train()
        loss_fn = getattr(module, "loss_fn", None) or default_loss
        make_optimizer = getattr(module, "make_optimizer", None) or default_optimizer
        optimizer = call("make_optimizer()", make_optimizer, model.parameters())
        if not (callable(getattr(optimizer, "step", None)) and callable(getattr(optimizer, "zero_grad", None))):
            raise ModelFileError(f"{path.name}: make_optimizer() must return an optimizer (with step() and "
                                 f"zero_grad()), got {type(optimizer).__name__}")
        return cls(model, inputs, target, loss_fn, optimizer, device, batch_size,
                   "loss_fn" if hasattr(module, "loss_fn") else "default")

    def run(self, recorder: Optional[Recorder] = None):
        """Batch to device, forward, loss, backward, optimizer step, zero_grad; returns the loss.

        With a recorder, each part is labelled with its phase.
        """
        def phase(name):
            if recorder is not None:
                recorder.phase = name

        phase("other")
        inputs = _to_device(self.inputs, self.device)
        target = _to_device(self.target, self.device)
        phase("forward")
        with self.autocast():
            output = self.model(*inputs)
            loss = self.loss_fn(output, target)
        phase("backward")
        loss.backward()
        phase("optimizer")
        self.optimizer.step()
        phase("other")
        self.optimizer.zero_grad(set_to_none=True)
        return loss


class _Run:
    def __init__(self, path: Path, backend: Backend, *, sync: bool, profiler: bool, run_mode: str,
                 verify: bool = False):
        self.path = path
        self.verify = verify
        self.verifier = None
        self.backend = backend
        self.sync = sync
        self.profiler_enabled = profiler
        self.run_mode = run_mode
        # The run's facts as flat meta keys, gathered as it goes; the Session types them (RunMeta).
        self.meta = {
            **run_facts(path, kind=LIVE, run_mode=run_mode, torch_version=torch.__version__),
            "backend": backend.name,
            "device": str(backend.device()),
            "device_name": _safe(backend.device_name, "unknown"),
            "backend_versions": _safe(backend.versions, {}),
            "sync": bool(sync and backend.is_accelerator()),
            "timing": _timing_note(backend, sync),
            "profiler": profiler,
        }
        if verify:
            self.meta["verify"] = True
        self.meta.update(backend.run_meta())
        self.step_times_ms: list = []  # the recorded (or profiled) measured steps
        self.unrecorded_step_times_ms: list = []  # steps nothing recorded or profiled, run beside them
        #: every step's loss, checked for NaN/inf once recording is over (never during a step)
        self.losses: list = []
        #: the rows of the recording under way (how much a Ctrl-C has to save)
        self.live_rows: list = []
        self.interrupted = False
        #: the exception that stopped the run, as the user's code or the device raised it
        self.raised: Optional[BaseException] = None

    # -- contract ------------------------------------------------------------
    def contract(self, *, batch_size, steps: int, warmup: int, training: "Optional[TrainingStep]" = None,
                 prepare=None) -> Session:
        training = training or TrainingStep.from_file(self.path, self.backend, batch_size, call=self._user_call)
        if prepare is not None:
            prepare(training)
        self.meta.update(
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
            self.meta["notes"] = self.meta.get("notes", []) + [
                "the warm-up step failed; the step was taken again, recorded, to show the call that fails"]
            session = self._record_every_step(training, 1)
        elif self.sync or not self.profiler_enabled or self.verify:  # --verify checks every call
            session = self._record_every_step(training, steps)
        else:
            session = self._record_steady_state(training, steps)
        session.meta = session.meta.updated(duration_s=round(time.perf_counter() - start, 3))
        return session

    def _warm_up(self, training: "TrainingStep", warmup: int) -> Optional[DmlprofError]:
        """Unrecorded steps; the error of one that failed (Ctrl-C is raised at once)."""
        if not warmup:
            return None
        with warnings.catch_warnings():
            # Fallback warnings print once per process; the measured steps record them call by call.
            warnings.filterwarnings("ignore", message=FALLBACK_WARNING.pattern)
            with progress.phase("warm-up", total=warmup) as bar, refusals(self.backend):
                for _ in range(warmup):
                    # Ops an extension defined since the run began (torchvision's, imported with the
                    # model file): the recorder covers them for measured steps, this for warm-up ones.
                    self.backend.refresh()
                    try:
                        self._guarded(lambda: self._timed_step(training, None))
                    except (DeviceError, ModelRaisedError) as exc:
                        return exc
                    bar.advance()
        return None

    def _record_every_step(self, training: "TrainingStep", steps: int) -> Session:
        """Every measured step through the dispatch mode (exact, per-call sync possible)."""
        self.meta["recording"] = "every call of every measured step through the dispatcher"
        recorder = Recorder(self.backend, sync=self.sync, verifier=self._new_verifier(training.model))
        recorder.modules.name_tree(training.model)
        self.live_rows = recorder.rows
        profiler = ProfilerAlongside(self.backend, enabled=self.profiler_enabled)

        def finish():
            with self._processing():
                recording.close()
                return self._finish(recorder, profiler)

        with Recording(recorder, profiler) as recording:
            with progress.phase("verified steps" if self.verify else "steps", total=steps) as bar:
                for step in range(steps):
                    recorder.step = step
                    recorder.modules.reset_nodes()
                    self._guarded(lambda: self._timed_step(training, recorder, keep_time=True), finish=finish)
                    self.meta["steps"] = step + 1
                    bar.advance()
            session = finish()  # inside: stopping the profiler is part of the processing shown
        if self.backend.is_accelerator():  # per-call recording and syncs slow a launch-bound step down
            self._report_unrecorded_step_time(session, training, steps)
        return session

    def _record_steady_state(self, training: "TrainingStep", steps: int) -> Session:
        """One structure step through the dispatch mode; measured steps timed by torch.profiler alone.

        See dmlprof/record/steady.py. Falls back to recording every step when
        the structure step's trace cannot be lined up with its calls.
        """
        recorder = Recorder(self.backend, sync=False)
        recorder.modules.name_tree(training.model)
        structure_profiler = ProfilerAlongside(self.backend)
        with progress.phase("structure step", total=1) as bar:
            with structure_profiler:
                with recorder:
                    with torch.profiler.record_function(f"{steady.STEP_RANGE}0"):
                        started = time.perf_counter_ns()
                        self._guarded(lambda: self._timed_step(training, recorder))
                        self.meta["structure_step_ms"] = round((time.perf_counter_ns() - started) / 1e6, 3)
            template = rows_to_frame(recorder.rows, recorder.evidence, self.backend)
            structure = steady.Structure.from_template(template, structure_profiler.op_events())
            bar.advance()
        if structure is None:
            self.meta["notes"] = self.meta.get("notes", []) + [
                "the structure step's trace did not line up with its calls; every step was recorded instead"
            ]
            return self._record_every_step(training, steps)
        self.meta["recording"] = (
            "one structure step through the dispatcher; measured steps timed per call by torch.profiler "
            "and aligned with it by op name (--no-sync)"
        )
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
                    self.meta["steps"] = step + 1
                    bar.advance()
            session = finish()  # inside: stopping the profiler is part of the processing shown
        # The profiler inflates a launch-bound step by a third or more (H200: 1.35x ResNet-18 bs 8,
        # 1.57x LeNet-5). (Pausing it between steps instead costs about 1 ms a resume: LeNet's
        # profiled steps took 1.40x a profiler-only step.)
        self._report_unrecorded_step_time(session, training, steps)
        return session

    def _report_unrecorded_step_time(self, session: Session, training: "TrainingStep", steps: int) -> None:
        """The step time users read: as many steps as were measured, run after recording stopped,
        with nothing recording or profiling them (a prediction has no times; --verify's steps are
        checked ones; a partial run stops where it broke). Not on a DirectML stand-in: its times are
        host-CPU times, and its fallback counters must hold the recorded steps alone."""
        if self.meta.get("partial") or self.verify or self.backend.stands_in_for_directml:
            return
        with progress.phase("unrecorded steps", total=steps) as bar:
            for _ in range(steps):
                self._guarded(lambda: self._timed_step(training, None, keep_time="unrecorded"))
                bar.advance()
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
        self.meta["steady_state"] = {
            "structure_step_calls": len(structure.template),
            "matched_steps": len(frames),
            "unmatched_steps": unmatched,
            "fallback_mismatch_steps": mismatched,
            "calls_timed_from_structure_step": unmatched_calls,
        }
        if unmatched or mismatched:
            self.meta.setdefault("notes", []).append(
                f"steps {unmatched + mismatched} differed from the structure step and are "
                + ("left out" if unmatched else "kept, but their fallbacks differed")
                + "; scan without --no-sync to record every call of every step"
            )
        return self._session(ops, events, recorder, profiler)

    def _timed_step(self, training: "TrainingStep", recorder, keep_time: bool = False):
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
        if keep_time:
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            (self.unrecorded_step_times_ms if keep_time == "unrecorded" else self.step_times_ms).append(elapsed_ms)

    # -- script ----------------------------------------------------------------
    def script(self, *, script_args: list, steps: int, warmup: int, run_to_end: bool = False,
               remap_from: Optional[str] = None, module: Optional[str] = None) -> Session:
        self.meta.update(script_args=script_args, steps=0, batch_size=None)
        recorder = Recorder(self.backend, sync=self.sync, verifier=self._new_verifier(None))
        self.live_rows = recorder.rows
        profiler = ProfilerAlongside(self.backend, enabled=self.profiler_enabled)
        # After the recorded steps the profiler stops too: a script left to run to its end
        # would otherwise pile up hours of events.
        recorder.window = StepWindow(warmup, steps, run_to_end, on_close=lambda: profiler.__exit__(None, None, None))
        start = time.perf_counter()

        def run_script():
            with _script_context(self.path, script_args, module), self._script_devices(remap_from):
                try:
                    with forked_child_ends_here(exits=(SystemExit, HardExit)):
                        if module:
                            runpy.run_module(module, run_name="__main__", alter_sys=True)
                        else:
                            runpy.run_path(str(self.path), run_name="__main__")
                except WindowClosed:
                    pass  # the recorded steps are done: the script is stopped, cleanly
                except (SystemExit, HardExit) as exc:
                    if exc.code not in (None, 0):
                        raise ModelRaisedError(f"{self.path.name} exited with status {exc.code}"
                                               + (" (os._exit)" if isinstance(exc, HardExit) else "")) from None

        def finish():
            with self._processing():
                recording.close()
                self.meta["steps"] = recorder.step if recorder.window.taken >= warmup else 0
                self.meta["script_window"] = recorder.window.describe()
                return self._finish(recorder, profiler)

        self.meta["recording"] = ("every call of the script's optimizer steps through the dispatcher (and of its "
                                  "set-up before the first step)")
        if remap_from:
            self.meta["remapped_from"] = remap_from
        self.backend.reset_peak_memory()
        with Recording(recorder, profiler) as recording:
            with progress.phase("optimizer steps", total=warmup + steps) as bar:
                recorder.window.progress = bar
                self._guarded(run_script, finish=finish)
            self.meta["duration_s"] = round(time.perf_counter() - start, 3)
            session = finish()  # inside: stopping the profiler is part of the processing shown
        if session.ops.empty and recorder.window.taken:  # it ran ops, all in steps left unrecorded
            raise ModelFileError(
                f"{self.path.name} took {recorder.window.taken} optimizer step(s), all of them unrecorded warm-up "
                f"(--warmup {warmup}): nothing was recorded",
                remedy="scan with --warmup 0, or let the script take more steps (its own arguments go after --)")
        if session.ops.empty:
            raise ModelFileError(
                f"{self.path.name} is neither a model file (build_model, make_batch) "
                "nor a script that runs PyTorch ops: it ran none"
            )
        self._check_window(recorder.window)
        return _with_device_use(session, self.backend, remap_from)

    def _script_devices(self, remap_from: Optional[str]):
        """What a script asks of devices, answered by this scan's: a torch_directml stand-in, --from."""
        from contextlib import ExitStack

        stack = ExitStack()
        if self.backend.stands_in_for_directml:
            from dmlprof.backends.directml_shim import installed

            stack.enter_context(installed(self.backend))
        if remap_from:
            from dmlprof.backends.remap import remapped

            stack.enter_context(remapped(remap_from, self.backend))
        return stack

    def _check_window(self, window: StepWindow) -> None:
        if window.taken and window.taken < window.warmup + window.steps and not self.meta.get("partial"):
            recorded = ("its set-up and first step" if window.taken < window.warmup else
                        f"{window.taken - window.warmup} step(s) after {window.warmup} unrecorded")
            self.meta.setdefault("notes", []).append(
                f"the script took {window.taken} optimizer step(s), fewer than --warmup {window.warmup} + "
                f"--steps {window.steps}: the session holds {recorded}")

    # -- shared ------------------------------------------------------------------
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
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or SIGHUP (dmlprof.interrupts)
            raise interrupts.cause_of(stop, "interrupted before any step ran") from None
        except (SystemExit, HardExit) as exc:  # BaseExceptions: a silent exit would look like success
            raise ModelRaisedError(f"{what} called {_exit_call(exc)} before any step ran") from None
        except DmlprofError:
            raise
        except Exception as exc:
            raise self._explain(exc, what) from exc

    def _explain(self, exc: BaseException, what: str) -> DmlprofError:
        known = self.backend.known_error(exc)
        if known is not None:
            return DeviceError(f"{what}: {known.explanation}", remedy=known.remedy)
        remedy = None
        if self.run_mode == "script" and not self.meta.get("remapped_from"):
            # A script that checks for its own device ("assert torch.cuda.is_available()") fails in
            # its own words; where it names a device this scan does not have, say how to scan it.
            hint = _remap_hint(self.path)
            if hint and hint.split()[-1] != self.backend.name:
                remedy = f"if the script fails for want of {hint.split()[-1]}, scan it with {hint}"
        at = raised_at(exc)  # the user's line, so nobody has to run the script again without dmlprof to find it
        return ModelRaisedError(f"{what} raised {describe_exception(exc)}" + (f" (at {at})" if at else ""), remedy=remedy)

    def _guarded(self, body, *, finish=None):
        """Run ``body``; on Ctrl-C or an error raise one line, with ``finish()``'s partial session if given."""
        where = f"step {len(self.step_times_ms) + 1}" if self.run_mode == "contract" else self.path.name
        try:
            body()
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or SIGHUP (dmlprof.interrupts)
            cause: DmlprofError = interrupts.cause_of(stop)
        except (SystemExit, HardExit) as exc:  # from a contract step (a script's own exit is handled in script())
            cause = ModelRaisedError(f"{where} called {_exit_call(exc)}")
        except ModelRaisedError as exc:
            cause = exc
        except DmlprofError:
            raise
        except Exception as exc:
            cause = self._explain(exc, where)
            self.raised = exc
        else:
            return
        if finish is None:  # warming up, or nothing recorded yet: nothing to keep
            raise cause
        self.meta.update(partial=True, partial_reason=str(cause.one_line()))
        if isinstance(cause, Interrupted):
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
            # Which call failed, and the user's line that made it.
            where = session.meta.failed_source or ""
            text = str(cause)
            if where and text.endswith(f" (at {where})"):  # the line _explain found: the call joins it
                text = text[: -len(f" (at {where})")]
            located = type(cause)(f"{text} (at {failed}{', ' + where if where else ''})", remedy=cause.remedy)
            located.exit_code, cause = cause.exit_code, located  # SIGTERM's 143 is the instance's own
            session.meta = session.meta.updated(partial_reason=cause.one_line())
        raise ScanStopped(cause, session)

    def _finish(self, recorder: Recorder, profiler: Optional[ProfilerAlongside]) -> Session:
        ops = rows_to_frame(recorder.rows, recorder.evidence, self.backend)
        if recorder.failed_row is not None and self.meta.get("partial"):
            failed = ops.iloc[recorder.failed_row]
            self.meta["failed_op"], self.meta["failed_source"] = failed["op"], failed["source"]
            self._note_device_failure(failed)
        events = None
        if self.interrupted and profiler is not None and profiler.profile is not None:
            # reading the profiler's events is most of the time a long run takes to save
            self.meta.setdefault("notes", []).append(
                "interrupted: torch.profiler's events were not read, so there is no cross-check of the times")
        elif profiler is not None and profiler.profile is not None:
            events = profiler.op_events()
            ops = join_call_events(ops, events, device_times=self.backend.profiler_device_activity)
        return self._session(ops, events, recorder, profiler)

    def _note_device_failure(self, failed) -> None:
        """The failing call is the device's refusal (DirectML raises or would end the process): say so first."""
        on_device = self.backend.device_type in failed["input_devices"] + failed["output_devices"]
        found = self.backend.failure_in(self.raised, on_device) if self.raised is not None else None
        if found is None:  # the user's code failed: not the device's refusal
            return
        known = self.backend.known_error(self.raised)
        self.meta["device_failure"] = {
            "op": failed["op"], "kind": found.kind, "message": found.message, "dtypes": failed["dtypes"],
            "source": failed["source"], "explanation": known.explanation if known else "",
            "remedy": known.remedy if known else "", "observed": not self.backend.predicted}

    def _check_losses(self) -> None:
        """Note the first step whose loss was NaN or infinite (after recording: the check reads the device)."""
        if self.backend.predicted:
            return  # a prediction's values are stand-ins, and reading them would count as calls
        for number, loss in enumerate(self.losses, start=1):
            try:
                # on the CPU: isfinite may fall back on the device, and its warning is not the model's
                value = loss.detach().to("cpu", torch.float32)
                finite = bool(torch.isfinite(value).all())
            except Exception:  # a loss the device cannot check is not ours to judge
                continue
            if not finite:
                value = value.item() if value.numel() == 1 else "nan or inf"
                self.meta["nonfinite_loss"] = {"step": number, "steps_run": len(self.losses), "value": str(value)}
                return

    def _session(self, ops, events, recorder: Recorder, profiler: Optional[ProfilerAlongside] = None) -> Session:
        self._check_losses()
        profiler_ops = profiler_op_totals(events) if events is not None else None
        if "steady_state" in self.meta:  # the times are the profiler's own: nothing to cross-check
            profiler_ops = None
            self.meta["profiler_check"] = {"note": "measured steps were timed by torch.profiler itself"}
        memory = _safe(self.backend.memory, None)
        self.meta.update(
            step_times_ms=[round(t, 3) for t in self.step_times_ms],
            memory=vars(memory) if memory is not None else {},
            warnings=_other_warnings(recorder, self.backend),
            module_classes=recorder.modules.classes(),
        )
        seen = ops.iloc[:profiler.covered_calls] if profiler is not None and profiler.covered_calls is not None else ops
        if profiler_ops is not None:
            self.meta["profiler_check"] = _profiler_check(seen, profiler_ops, synced=bool(self.meta.get("sync")))
        if events is not None and self.backend.profiler_device_activity:
            self.meta["device_time_check"] = _device_time_check(seen, events)
        left_out = _recording_notes(recorder, profiler)
        if left_out:
            self.meta["notes"] = self.meta.get("notes", []) + left_out
        if self.backend.predicted:
            ops = _predicted_frame(ops, self.backend, self.meta, recorder.rows)
        session = Session(meta=dict(self.meta), ops=ops)
        # in a launched job: rank metadata, per-collective times, torch.profiler's own trace of this rank
        annotate_distributed(session, events, profiler)
        if self.verifier is not None:
            session.extras["verify"] = self.verifier.result(partial=bool(self.meta.get("partial")))
        if profiler_ops is not None:
            session.profiler_ops = profiler_ops
        return session


def _recording_notes(recorder: Recorder, profiler: Optional[ProfilerAlongside]) -> list:
    """What a bounded recording left out, in words (dmlprof.record.recorder.MAX_RECORDED_CALLS,
    dmlprof.record.profiler.PROFILED_CALLS_MAX)."""
    notes = []
    if recorder.full:
        notes.append(f"the recording holds the first {recorder.filled_at[-1]:,} calls, its most (about 2 KB a call "
                     "until saved); the calls after them ran unrecorded")
    if profiler is not None and profiler.note():
        notes.append(profiler.note())
    return notes


PLACEHOLDER_NOTE = ("these ops read values the prediction did not have (beyond its budget for real values, or "
                    "from tensors made on the meta device) and made them up: a value read back, or an output sized "
                    "by the data; the calls after the first may differ from a real run (the report marks them)")


def _predicted_frame(ops, backend: Backend, meta: dict, rows: list):
    """A prediction has calls, not times: the host time spent predicting is nobody's cost."""
    ops = ops.copy()
    ops["evidence"] = backend.fallback_evidence  # every verdict rests on the table's registrations
    ops["time_ns"] = 0
    ops["start_ns"] = 0
    placeholders = backend.placeholder_ops()
    meta.update(step_times_ms=[], memory={}, placeholder_ops=placeholders)
    guess = backend.first_guess()
    if guess is not None:
        first_seq = _first_call_after(rows, guess.time_ns)
        during = bool(rows) and rows[first_seq][5] <= guess.time_ns  # made up inside that call, not before it
        meta["predicted_guess"] = {"first_seq": first_seq, "op": guess.op, "why": guess.why,
                                   "source": rows[first_seq][10] if during else ""}
    if placeholders:
        meta["notes"] = meta.get("notes", []) + [PLACEHOLDER_NOTE]
    return ops


def _first_call_after(rows: list, time_ns: int) -> int:
    """The first recorded call that may follow a value made up at ``time_ns``: the call that was running
    then (a value is made up inside a call), or the first call when it came before every recorded one."""
    starts = [row[5] for row in rows]
    return max(bisect.bisect_right(starts, time_ns) - 1, 0)


def _with_device_use(session: Session, backend: Backend, remap_from: Optional[str]) -> Session:
    """A script that never put a tensor on the scanned device says so first, not "all on the device"."""
    if not backend.is_accelerator():
        return session
    ops = session.ops
    device_type = backend.device_type
    used = ops["input_devices"].str.contains(device_type, regex=False) | \
        ops["output_devices"].str.contains(device_type, regex=False)
    if used.any():
        return session
    chose = sorted({d for column in ("input_devices", "output_devices") for cell in ops[column] for d in cell.split(",") if d})
    hint = "" if remap_from else _remap_hint(Path(session.meta.model or ""))
    session.meta = session.meta.updated(device_unused=DeviceUnused(tuple(chose), hint))
    return session


def _remap_hint(path: Path) -> str:
    """Which --from would put a script's work on the scanned device, read from its source."""
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for device in ("cuda", "mps"):
        if f"{device}" in source:
            return f"--from {device}"
    return ""


def loss_problem(session: Session) -> Optional[ModelRaisedError]:
    """The error a complete scan still ends with when its loss went NaN or infinite (None when it did not)."""
    found = session.meta.get("nonfinite_loss")
    if not isinstance(found, dict):
        return None
    return ModelRaisedError(
        f"the loss was {found.get('value')} at training step {found.get('step')} of {found.get('steps_run')} "
        "(warm-up included); the report covers every step, but the training diverges",
        remedy="lower the learning rate, check the data and the loss for NaN/inf")


def _profiler_check(ops, profiler_ops, synced: bool = False) -> dict:
    """Totals over the ops both we and torch.profiler timed."""
    from dmlprof.analysis import profiler_crosscheck

    both = profiler_crosscheck(ops, profiler_ops).dropna(subset=["profiler_time_ms"])
    ours, theirs = float(both["time_ms"].sum()), float(both["profiler_time_ms"].sum())
    return {
        "matched_ops": int(len(both)),
        "time_ms": round(ours, 3),
        "profiler_time_ms": round(theirs, 3),
        "ratio": round(ours / theirs, 4) if theirs else None,
        **({"note": "per-op sync: our times include waiting for the device after each call; "
                    "the profiler's host ranges end when the call returns"} if synced else {}),
    }


def _device_time_check(ops, events) -> dict:
    """Kernel time joined to our calls against all kernel time the profiler saw."""
    ours = float(ops["device_time_ns"].fillna(0).sum()) / 1e6
    theirs = float(events["self_device_time_ns"].sum()) / 1e6
    return {"calls_device_time_ms": round(ours, 3), "profiler_kernel_time_ms": round(theirs, 3),
            "ratio": round(ours / theirs, 4) if theirs else None}


def _other_warnings(recorder: Recorder, backend: Backend) -> list:
    """Warnings that are not fallback evidence, once each with a count."""
    counts = Counter(
        (category, message)
        for message, category in zip(recorder.warnings.messages, recorder.warnings.categories)
        if backend.fallback_ops_in(message) is None
    )
    return [{"category": c, "message": m[:500], "count": n} for (c, m), n in counts.most_common(50)]


def _timing_note(backend: Backend, sync: bool) -> str:
    if not backend.is_accelerator():
        return "wall time per call on the CPU"
    if sync:
        return "wall time per call, device synchronised after each call"
    return "host-side time per call (--no-sync): device work may finish later and be billed to another call"


def _safe(fn, default):
    try:
        return fn()
    except Exception:
        return default


@contextmanager
def _script_context(path: Path, script_args: list, module: Optional[str] = None):
    """Run a script as ``python path args...`` (or ``python -m module args...``) would: argv and sys.path[0]."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(path.resolve() if module else path)] + script_args
    sys.path.insert(0, os.getcwd() if module else str(path.resolve().parent))
    try:
        yield
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path
