"""Runs a model file's training step (or a whole script, or a block of code) under the recorder.

Contract mode (:mod:`~dmlprof.runner.contract`): warm-up steps, then measured steps of forward +
loss + backward + optimizer step, each op call recorded with its phase. Script mode
(:mod:`~dmlprof.runner.script`): the file runs as ``__main__`` with its own argv, recorded from start
to end, phases inferred. Either way the result is a :class:`~dmlprof.session.Session`
(:mod:`~dmlprof.runner.assembly`); when a run stops early (Ctrl-C, the model raises) the error
carries the partial session, which says it is partial.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Optional, Sequence

from dmlprof.backends import Backend, resolve_backend
from dmlprof.errors import DmlprofError, ModelRaisedError, UsageError
from dmlprof.model_file import describe_exception, inspect_model_file
from dmlprof.record.profiler import ProfilerAlongside
from dmlprof.record.recorder import Recorder
from dmlprof.runner import nested
from dmlprof.runner.contract import ContractRun
from dmlprof.runner.run import Recording, Run, ScanStopped
from dmlprof.runner.script import ScriptRun
from dmlprof.runner.training_step import TrainingStep, default_loss, default_optimizer
from dmlprof.runner.user_code import HardExit, cwd_kept, hard_exit_trapped, streams_kept
from dmlprof.session import Session

__all__ = ["DEFAULT_STEPS", "DEFAULT_WARMUP", "HardExit", "Profiled", "ScanStopped", "TrainingStep", "default_loss",
           "default_optimizer", "loss_problem", "profile", "scan", "scan_training_step"]

DEFAULT_STEPS = 3
DEFAULT_WARMUP = 1


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
    prepare: Optional[Callable[[TrainingStep], None]] = None,
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
    kind = ContractRun if model_file.mode == "contract" else ScriptRun
    run = kind(model_file.path, backend, sync=sync, profiler=profiler, run_mode=model_file.mode, verify=verify)
    if model_file.notes:
        run.facts.set(notes=model_file.notes)
    if module:
        run.facts.set(model_name=module)  # a package's __main__.py is named by its package
    with backend.run_context(), cwd_kept(), streams_kept(), hard_exit_trapped(backend):
        if model_file.mode == "contract":
            return run.run(batch_size=batch_size, steps=steps, warmup=warmup, prepare=prepare)
        if batch_size is not None:
            raise UsageError(f"--batch-size applies to model files; {model_file.path.name} is a script, "
                             "which makes its own batches")
        return run.run(script_args=list(script_args), steps=steps, warmup=warmup, run_to_end=run_to_end,
                          remap_from=remap_from, module=module)


def scan_training_step(training: TrainingStep, backend: Backend, path, *, steps: int = DEFAULT_STEPS,
                       warmup: int = DEFAULT_WARMUP, sync: bool = True, profiler: bool = True,
                       verify: bool = False) -> Session:
    """Scan an already built :class:`TrainingStep` (what ``scan`` does after loading a file).

    Benchmarks use it to compare recording against a bare step on the very
    same model, optimizer state and allocator.
    """
    run = ContractRun(Path(path), backend, sync=sync, profiler=profiler, run_mode="contract", verify=verify)
    return run.run(batch_size=training.batch_size, steps=steps, warmup=warmup, training=training)


class Profiled:
    """What ``profile()`` yields; ``session`` is filled in when the block ends."""

    session: Optional[Session] = None
    #: the device the block is recorded on: move the model and tensors there (``x.to(run.device)``), or nothing
    #: runs on it (a block's calls on CPU tensors are only counted)
    device = None
    #: None for a block recorded on its own; for a block run inside a recording already active in this process (a
    #: scanned script's own ``dmlprof.profile`` block), whose recording holds its calls, in words
    #: (:mod:`dmlprof.runner.nested`)
    recorded_by: Optional[str] = None

    def __init__(self, device=None):
        self.device = device

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

    Inside a recording already active in this process (the script is being scanned), the block runs as it
    does unscanned and its session is that recording's calls of the block (``run.recorded_by`` says so).
    """
    backend = backend or resolve_backend(device)
    if nested.recording_active():  # one recording a process: a second would change what the program does
        with nested.block_of_the_active_recording(Profiled(device=backend.device()), name) as result:
            yield result
        return
    run = Run(Path(name), backend, sync=sync, profiler=profiler, run_mode="block")
    run.facts.set(steps=0, batch_size=None)
    run.facts.set_recording(description="every call of the block through the dispatcher")
    recorder = Recorder(backend, sync=sync)
    alongside = ProfilerAlongside(backend, enabled=profiler)
    result = Profiled(device=backend.device())
    start = time.perf_counter()
    with Recording(recorder, alongside) as recording:
        raised = None
        try:
            yield result
        except BaseException as exc:
            raised = exc
            run.facts.set(partial=True, partial_reason=describe_exception(exc))
            raise
        finally:
            recording.close()
            run.facts.set(duration_s=round(time.perf_counter() - start, 3), steps=recorder.step)
            backend.notice_unrecorded_aborts(raised)  # another thread's, a forked worker's: nothing recorded them
            _caught_refusal_in_block(run, backend, raised)
            result.session = run._finish(recorder, alongside)


def _caught_refusal_in_block(run: Run, backend: Backend, raised: Optional[BaseException]) -> None:
    """A block that caught a refused call (or the device's error in place of one that ends DirectML's process)
    and went on: the session's finding is that call, as a scan's is (DeviceFailure)."""
    refusal, backend.first_refusal = backend.first_refusal, None
    if refusal is None:
        return
    run.raised = refusal.error
    if raised is refusal or raised is refusal.error:  # not caught: the block ended there
        return
    run.ended_by_refusal = True
    if not backend.raises_for_aborts:  # the calls after a refused one are not kept: a partial session
        run.facts.set(partial=True, partial_reason=f"the block caught a refused call: {refusal.error}")


def loss_problem(session: Session) -> Optional[ModelRaisedError]:
    """The error a complete scan still ends with when its loss went NaN or infinite (None when it did not)."""
    found = session.meta.nonfinite_loss
    if found is None:
        return None
    return ModelRaisedError(
        f"the loss was {found.value} at training step {found.step} of {found.steps_run} "
        "(warm-up included); the report covers every step, but the training diverges",
        remedy="lower the learning rate, check the data and the loss for NaN/inf")
