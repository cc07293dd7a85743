"""One rank of a launched job: ``torchrun ... -m dmlprof scan MODEL.py``.

The rank scans as a single process would (the same runner, recorder and
profiler); what differs is around it:

- a model file gets the DDP variant of its training step: dmlprof starts the
  process group (``gloo``; ``nccl`` when every local rank has a GPU of its
  own) and wraps the model in DistributedDataParallel before any step runs. A
  script starts its own group and wraps its own model;
- the session goes to ``RUN_DIR/rank<N>.session.json`` and a trace with
  ``distributedInfo`` to ``RUN_DIR/traces/<run>/rank<N>.<ts>.pt.trace.json``;
- SIGTERM (torchrun stops every rank once one fails) ends the scan like
  Ctrl-C, so what was recorded is kept; a watchdog ends a rank stuck at a
  collective (dmlprof.distributed.watchdog);
- rank 0 prints the merged report once every rank has saved its session
  (unless ``dmlprof scan --nproc`` started the job: then its parent does).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from dmlprof.facts import RunFacts

from dmlprof.distributed.env import PARENT_ENV, RUN_DIR_ENV, RankInfo, run_dir, session_path
from dmlprof.errors import DmlprofError, Interrupted, UsageError
from dmlprof.interrupts import SignalStop
from dmlprof.job import refuse_single_scan_options

#: how long rank 0 waits for the other ranks' sessions before merging what it has
MERGE_WAIT_S = 120.0
#: DDP's first two iterations are not like the rest: it builds its gradient buckets in the first and
#: rebuilds them (broadcasting the new layout) at the start of the second. Measured steps come after.
DDP_WARMUP_STEPS = 2
DEFAULT_COMM_TIMEOUT_S = 600.0
ERROR_NAME = "rank{rank}.error.json"


class LauncherStop(SignalStop):
    """SIGTERM: the launcher stops this rank (torchrun does so to every rank once one fails).

    ``recorder`` is the recorder that was recording when the signal came: when
    the stop escapes the runner (it came while the runner handled another
    error), its rows are still what this rank can save.
    """

    def __init__(self, recorder=None):
        super().__init__()
        self.recorder = recorder


class RankError(DmlprofError):
    """A rank's failure, its line prefixed with the rank."""

    def __init__(self, rank: int, cause: DmlprofError, saved_to=None):
        super().__init__(f"rank {rank}: {cause.one_line()}")
        self.exit_code = cause.exit_code
        self.saved_to = saved_to


def dist_backend_for(backend, info: RankInfo, requested: Optional[str] = None) -> str:
    """``nccl`` when every local rank has a CUDA device of its own, else ``gloo`` (CPU, or ranks sharing a GPU)."""
    if requested and requested != "auto":
        return requested
    if backend.name == "cuda":
        import torch

        if torch.distributed.is_nccl_available() and torch.cuda.device_count() >= info.local_world_size:
            return "nccl"
    return "gloo"


def device_index(device: str, info: RankInfo) -> int:
    """The device this rank uses: its local rank, wrapped over the devices there are (ranks may share one)."""
    if device not in ("cuda", "auto"):
        return 0
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return info.local_rank % count if count else 0


def run_rank(args, info: RankInfo) -> int:
    """Scan this rank, save its session in the run folder; rank 0 prints the merged report."""
    from dmlprof.backends import resolve_backend
    from dmlprof.model_file import inspect_model_file

    from dmlprof.output import check_paths, script_output_to_stderr

    refuse_single_scan_options(args, "a distributed run")
    check_paths(args, inputs=[args.model])
    model_file = inspect_model_file(args.model)
    backend = resolve_backend(args.device, device_index(args.device, info))
    folder = _own_run_dir(run_dir(args.out, str(model_file.path), backend.name, info))
    os.environ[RUN_DIR_ENV] = str(folder)  # this process's own: where the session hook exports the profiler trace
    timeout_s = float(getattr(args, "comm_timeout", None) or DEFAULT_COMM_TIMEOUT_S)
    base_facts = _base_facts(model_file, backend, info, args.sync)
    with script_output_to_stderr(args):  # --json -: rank 0's merged report is all standard output holds
        session, error = _scan_rank(args, info, model_file, backend, folder, timeout_s, base_facts)
    try:
        saved = _save(session, folder, info, args) if session is not None else None
    except UsageError as unsaved:  # a full disk: the session is lost, and that is this rank's error now
        saved, error = None, error or unsaved
    if error is not None:
        if os.environ.get(PARENT_ENV):  # the parent composes the one line for the whole run
            write_error(folder, info.rank, error.one_line(), error.exit_code)
            return error.exit_code
        raise RankError(info.rank, error, saved)
    if info.rank == 0 and not os.environ.get(PARENT_ENV):
        from dmlprof.job.report import print_run

        wait_for_sessions(folder, info.world_size, MERGE_WAIT_S)
        print_run(folder, args)
    return 0


def _own_run_dir(folder: Path) -> Path:
    """The job's run folder, shared by its ranks: created if missing, refused when another user made it."""
    from dmlprof.files import own_dir

    try:
        return own_dir(folder)
    except OSError as exc:
        raise UsageError(f"cannot use the run folder {folder}: {exc.strerror or exc}",
                         remedy="give another --out, or remove the folder") from None


def _scan_rank(args, info, model_file, backend, folder, timeout_s, base_facts):
    """(session or None, DmlprofError or None)."""
    from dmlprof.distributed.watchdog import Watchdog
    from dmlprof.record.recorder import Recorder
    from dmlprof.runner import ScanStopped, scan

    contract = model_file.mode == "contract"
    hang = _HangHandler(folder, info, backend, base_facts)
    watchdog = Watchdog(folder, info.rank, info.world_size, timeout_s, lambda: Recorder.current, hang)
    session = error = None
    earlier = Recorder.last
    with _sigterm_stops(lambda: Recorder.last is not earlier), watchdog:
        group = None
        try:
            if contract:
                group = _init_group(backend, info, getattr(args, "dist_backend", None), timeout_s)
            from dmlprof.runner import DEFAULT_STEPS, DEFAULT_WARMUP

            asked = args.warmup if args.warmup is not None else DEFAULT_WARMUP
            warmup = max(asked, DDP_WARMUP_STEPS) if contract else asked
            session = scan(args.model, backend=backend, batch_size=args.batch_size,
                           steps=args.steps if args.steps is not None else DEFAULT_STEPS, warmup=warmup,
                           sync=args.sync, profiler=args.profiler, script_args=args.script_args,
                           run_to_end=args.run_to_end, remap_from=args.remap_from, module=getattr(args, "module", None),
                           prepare=ddp_variant(backend) if contract else None)
            if warmup != asked:
                session.meta = session.meta.updated(notes=session.meta.notes + (
                    f"warm-up raised to {warmup} steps: DDP builds its gradient buckets in the first step and "
                    "rebuilds them in the second",))
        except ScanStopped as stopped:
            session, error = stopped.session, _launcher_stop_explained(stopped.cause)
            session.meta = session.meta.updated(partial_reason=error.one_line())
        except LauncherStop as stop:  # raised where the runner could not turn it into a partial session
            error = _stopped_by_launcher()
            if stop.recorder is not None:
                session = snapshot_session(stop.recorder, backend, base_facts, error.one_line())
        except DmlprofError as exc:
            error = exc
        finally:
            if group is not None:
                _destroy_group()
    return session, error


def _launcher_stop_explained(cause: DmlprofError) -> DmlprofError:
    if isinstance(cause, Interrupted) and _sigterm_seen:
        return _stopped_by_launcher()
    return cause


def _stopped_by_launcher() -> DmlprofError:
    return Interrupted("stopped by the launcher (SIGTERM): torchrun stops every rank once one has failed")


_sigterm_seen = False


@contextmanager
def _sigterm_stops(recorded_before):
    """SIGTERM raises :class:`LauncherStop` in the main thread while the rank runs (POSIX; a no-op elsewhere).

    Not while the runner is already saving after a recording (``recorded_before()``
    and no recorder active): stopping there would lose what it saves.
    """
    global _sigterm_seen
    if not hasattr(signal, "SIGTERM") or os.name != "posix":
        yield
        return

    def stop(signum, frame):
        global _sigterm_seen
        from dmlprof.record.recorder import Recorder

        if _sigterm_seen:  # torchrun may signal twice (the process, its group): stop once, then save
            return
        _sigterm_seen = True
        if Recorder.current is not None:  # interrupt the model; the runner keeps what was recorded
            raise LauncherStop(Recorder.current)
        if not recorded_before():  # setting up or warming up: nothing to keep
            raise LauncherStop()
        # the runner is saving what it recorded: let it finish, the rank ends right after

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _init_group(backend, info: RankInfo, requested: Optional[str], timeout_s: float):
    """Start the default process group for a model file's DDP step; the watchdog's timeout fires first."""
    import torch.distributed as dist

    if not dist.is_available():
        raise UsageError("this torch build has no torch.distributed: a distributed scan cannot run")
    if dist.is_initialized():
        return None
    name = dist_backend_for(backend, info, requested)
    kwargs = {"backend": name, "timeout": _dt.timedelta(seconds=timeout_s + 60)}
    if name == "nccl":
        import torch

        torch.cuda.set_device(backend.device())
    try:
        dist.init_process_group(**kwargs)
    except (RuntimeError, ValueError) as exc:
        raise DmlprofError(f"cannot start the {name} process group: {str(exc).splitlines()[0][:200]}") from None
    return name


def _destroy_group() -> None:
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except (RuntimeError, ValueError):
        pass


def ddp_variant(backend):
    """The ``prepare`` hook that makes a model file's step the DDP variant: the model wrapped in DDP.

    DDP broadcasts rank 0's parameters and checks that every rank built the
    same model; a mismatch ends with DDP's own message (it names the ranks).
    """
    def prepare(training) -> None:
        from torch.nn.parallel import DistributedDataParallel

        device = backend.device()
        ids = [device.index if device.index is not None else 0] if device.type == "cuda" else None
        try:
            training.model = DistributedDataParallel(training.model, device_ids=ids)
        except RuntimeError as exc:
            from dmlprof.errors import DeviceError, ModelRaisedError

            if "No backend type associated with device type" in str(exc):  # measured on the emulated DirectML device
                raise DeviceError(f"DDP on {device.type}: no process-group backend takes {device.type} tensors "
                                  "(gloo takes CPU and CUDA tensors, nccl CUDA ones)",
                                  remedy="run the ranks with --device cpu, or a script that moves what it all-reduces to the CPU") from None
            raise ModelRaisedError(f"wrapping the model in DistributedDataParallel: {_first_line(exc)}") from None

    return prepare


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


class _HangHandler:
    """What the watchdog does when this rank is stuck: save what was recorded, one line, exit."""

    def __init__(self, folder: Path, info: RankInfo, backend, base_facts):
        self.folder, self.info, self.backend, self.base_facts = folder, info, backend, base_facts

    def __call__(self, line: str) -> None:
        from dmlprof.distributed.watchdog import EXIT_HUNG, end_process
        from dmlprof.record.recorder import Recorder

        saved = None
        try:
            session = snapshot_session(Recorder.current, self.backend, self.base_facts, line)
            saved = session.save(session_path(self.folder, self.info.rank))
        except Exception as exc:  # the line must still come out
            line += f" (the partial session could not be saved: {type(exc).__name__})"
        if os.environ.get(PARENT_ENV):
            write_error(self.folder, self.info.rank, line, EXIT_HUNG, hung=True)
        else:
            from dmlprof.output import error_line

            error_line(line, f"partial session saved to {saved}" if saved else None)
        end_process(EXIT_HUNG)


def snapshot_session(recorder, backend, base_facts, reason: str):
    """A partial session from the calls a (still running) recorder holds: what a stuck rank can keep."""
    from dmlprof.distributed.annotate import annotate
    from dmlprof.record.frame import empty_ops_frame
    from dmlprof.session import Session

    ops = recorder.frame() if recorder is not None else empty_ops_frame()
    facts = base_facts.copy()
    facts.set(partial=True, partial_reason=reason, steps=int(ops["step"].max()) + 1 if len(ops) else 0)
    facts.set_recording(description="the calls recorded until the watchdog ended the rank (no profiler data)")
    session = Session(meta=facts.build(), ops=ops)
    annotate(session, None)
    return session


def _base_facts(model_file, backend, info: RankInfo, sync: bool) -> "RunFacts":
    """The rank's facts as a scan of it starts with them (kept by a snapshot if the rank gets stuck)."""
    from dmlprof.runner.run import live_facts

    facts = live_facts(model_file.path, backend, run_mode=model_file.mode, sync=sync)
    facts.set(distributed=info.as_record())
    return facts


def _save(session, folder: Path, info: RankInfo, args) -> Path:
    from dmlprof.distributed.trace import write_rank_trace

    try:
        path = session.save(session_path(folder, info.rank))
    except OSError as exc:
        raise UsageError(f"cannot write the session under {folder}: {exc.strerror or exc}") from None
    if len(session.ops) and int(session.ops["time_ns"].sum()) > 0:
        write_rank_trace(session, Path(args.tb) if getattr(args, "tb", None) else folder / "traces", folder.name)
    return path


def write_error(folder: Path, rank: int, line: str, exit_code: int, hung: bool = False) -> bool:
    """The rank's one line, for the parent of ``dmlprof scan --nproc`` to compose its own; False when it
    cannot be written (a full disk: the parent then finds out and says so, in its one line)."""
    from dmlprof.files import write_atomic

    path = Path(folder) / ERROR_NAME.format(rank=int(rank))
    try:
        write_atomic(path, json.dumps({"rank": rank, "line": line, "exit_code": exit_code, "hung": hung}))
    except OSError:
        return False
    return True


def wait_for_sessions(folder: Path, world_size: int, timeout_s: float) -> list:
    """Wait until every rank's session file exists (or ``timeout_s`` passed); returns the ranks missing."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [r for r in range(world_size) if not session_path(folder, r).exists()]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.2)
