"""The script run: the user's file runs as ``__main__`` (or ``python -m module``) with its own argv,
recorded from its set-up through the optimizer steps asked for (:mod:`dmlprof.record.window`), its
phases inferred. A script asking for a device this scan does not have is answered by the scanned one
(a torch_directml stand-in, ``--from cuda``).
"""
from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Optional

from dmlprof import progress
from dmlprof.backends import Backend
from dmlprof.errors import DmlprofError, ModelFileError, ModelRaisedError
from dmlprof.meta import DeviceUnused
from dmlprof.record.forks import forked_child_ends_here
from dmlprof.record.profiler import ProfilerAlongside
from dmlprof.record.recorder import Recorder
from dmlprof.record.window import StepWindow, WindowClosed
from dmlprof.runner import user_code
from dmlprof.runner.run import Recording, Run, StepCalls, remap_hint
from dmlprof.runner.user_code import (ProcessReplaced, exit_handlers_run_at_its_end, run_as_main,
                                      run_module_as_main, script_context)
from dmlprof.session import Session


class ScriptRun(Run):
    """A script's run (``run_mode`` "script")."""

    def run(self, *, script_args: list, steps: int, warmup: int, run_to_end: bool = False,
            remap_from: Optional[str] = None, module: Optional[str] = None) -> Session:
        self.facts.set(script_args=script_args, steps=0, batch_size=None)
        recorder = Recorder(self.backend, sync=self.sync, verifier=self._new_verifier(None))
        self.live_rows = recorder.rows
        profiler = ProfilerAlongside(self.backend, enabled=self.profiler_enabled)
        # After the recorded steps the profiler stops too: a script left to run to its end
        # would otherwise pile up hours of events.
        recorder.window = StepWindow(warmup, steps, run_to_end, on_close=lambda: profiler.__exit__(None, None, None))
        # in the journal's header too: a script that dies mid-run is salvaged with its window (and the steps the
        # journal counted), not as a recording of its whole run
        self.facts.set(script_window=recorder.window.describe())
        start = time.perf_counter()

        replaced: list = []  # the script's os.exec* call, where it made one

        def run_script():
            environ_before = dict(os.environ)
            with script_context(self.path, script_args, module), self._script_devices(remap_from), \
                    exit_handlers_run_at_its_end():
                try:
                    with forked_child_ends_here(exits=(SystemExit,)):
                        if module:
                            run_module_as_main(module)
                        else:
                            run_as_main(self.path)
                except WindowClosed:  # the recorded steps are done: the script is stopped, cleanly
                    user_code.cut_short = "stopped"
                except ProcessReplaced as exc:  # a script restarting itself: what it runs next is not this scan's
                    user_code.cut_short = "stopped"
                    replaced.append((exc.call, {name: value for name, value in exc.environ.items()
                                                if environ_before.get(name) != value}))
                    self.facts.note(f"the script called {exc.call} after {recorder.window.taken} optimizer step(s), "
                                    "which would replace its process with one nothing records: dmlprof stopped it "
                                    "there, so what it runs after that is not scanned")
                except DmlprofError:
                    raise
                except Exception as exc:  # the script's own error: its sys.excepthook sees it, as under python
                    user_code.its_excepthook(exc)
                    raise
                except SystemExit as exc:
                    status = user_code.exit_status(exc.code)
                    if status != 0:  # as the process's status says it: sys.exit(256) is 0, sys.exit(True) 1
                        said = "" if isinstance(exc.code, int) else f": {exc.code}"  # a message, as Python prints it
                        raise ModelRaisedError(f"{self.path.name} exited with status {status}{said}") from None

        def finish():
            with self._processing():
                recording.close()
                self.facts.set(steps=recorder.step if recorder.window.taken >= warmup else 0,
                               script_window=recorder.window.describe())
                return self._finish(recorder, profiler)

        self.facts.set_recording(description="every call of the script's optimizer steps through the dispatcher "
                                             "(and of its set-up before the first step)")
        if remap_from:
            self.facts.set(remapped_from=remap_from)
        self.backend.reset_peak_memory()
        with Recording(recorder, profiler, facts=self.facts) as recording:
            with progress.phase("optimizer steps", total=warmup + steps) as bar:
                recorder.window.progress = bar
                # the calls of the step under way (a warm-up step beyond the first runs unrecorded: none counted)
                recorder.window.step_calls = self._follow_calls(bar, StepCalls(lambda: len(recorder.rows)),
                                                                steps_ended=lambda: recorder.window.taken)
                self._guarded(run_script, finish=finish,
                              recorded_whole=lambda: recorder.window.taken >= warmup + steps)
            self.facts.set(duration_s=round(time.perf_counter() - start, 3))
            session = finish()  # inside: stopping the profiler is part of the processing shown
        if session.ops.empty and recorder.window.taken:  # it ran ops, all in steps left unrecorded
            raise ModelFileError(
                f"{self.path.name} took {recorder.window.taken} optimizer step(s), all of them unrecorded warm-up "
                f"(--warmup {warmup}): nothing was recorded",
                remedy="scan with --warmup 0, or let the script take more steps (its own arguments go after --)")
        if session.ops.empty and replaced:
            raise _replaced_before_any_op(self.path.name, *replaced[0])
        if session.ops.empty:
            raise ModelFileError(
                f"{self.path.name} is neither a model file (build_model, make_batch) "
                "nor a script that runs PyTorch ops: it ran none"
            )
        self._check_window(recorder.window)
        return with_device_use(session, self.backend, remap_from)

    def _script_devices(self, remap_from: Optional[str]):
        """What a script asks of devices, answered by this scan's: a torch_directml stand-in, --from."""
        stack = ExitStack()
        if self.backend.stands_in_for_directml:
            from dmlprof.backends.directml_shim import installed

            stack.enter_context(installed(self.backend))
        if remap_from:
            from dmlprof.backends.remap import remapped

            stack.enter_context(remapped(remap_from, self.backend))
        return stack

    def _check_window(self, window: StepWindow) -> None:
        if window.taken and window.taken < window.warmup + window.steps and not self.facts.partial:
            recorded = ("its set-up and first step" if window.taken < window.warmup else
                        f"{window.taken - window.warmup} step(s) after {window.warmup} unrecorded")
            self.facts.note(
                f"the script took {window.taken} optimizer step(s), fewer than --warmup {window.warmup} + "
                f"--steps {window.steps}: the session holds {recorded}")


def with_device_use(session: Session, backend: Backend, remap_from: Optional[str]) -> Session:
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
    hint = "" if remap_from else remap_hint(Path(session.meta.model or ""))
    session.meta = session.meta.updated(device_unused=DeviceUnused(tuple(chose), hint))
    return session


def _replaced_before_any_op(name: str, call: str, set_by_it: dict) -> ModelFileError:
    """A script that restarts itself before any op (``os.execv`` after setting ``OMP_NUM_THREADS``, as launchers
    do): dmlprof scans one process and stops the script at that call, so nothing was recorded; the variables the
    script set for its new process are what to set on dmlprof's command instead, so it does not restart."""
    shown = " ".join(f"{key}={value[:40]}" for key, value in list(set_by_it.items())[:5])
    more = f" and {len(set_by_it) - 5} more" if len(set_by_it) > 5 else ""
    remedy = (f"set what the script sets for its new process ({shown}{more}) on dmlprof's command, so that it runs on "
              "without restarting" if set_by_it else "scan the program the script starts, with its arguments")
    return ModelFileError(f"{name} replaced its process ({call}) before it ran any PyTorch op: dmlprof scans one "
                          "process and stops a script at such a call, so nothing was recorded", remedy=remedy)
