"""``dmlprof scan --nproc N MODEL.py``: hand the job to ``torch.distributed.run`` (torchrun).

No launcher of our own: torchrun's own argument parser and ``elastic_launch``
start N ranks of ``python -m dmlprof scan MODEL.py ...`` on this machine
(``--standalone`` rendezvous), exactly as ``torchrun --nproc-per-node N -m
dmlprof scan ...`` would. The parent names the run folder, waits, then prints
the merged report; when ranks fail it prints one line that names the rank to
blame, and keeps the sessions the others saved.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import signal
import uuid
from pathlib import Path
from typing import Dict, List

from dmlprof.distributed.env import (MAX_LOCAL_RANKS, PARENT_ENV, PASS_THROUGH_ENV, RUN_DIR_ENV, RUN_ID_ENV,
                                    run_dir_name, session_path)
from dmlprof.errors import DmlprofError, UsageError
from dmlprof.job import refuse_single_scan_options

# Options of ``dmlprof scan`` forwarded to every rank as given (name, attribute).
_FORWARDED = (("--device", "device"), ("--batch-size", "batch_size"), ("--steps", "steps"), ("--warmup", "warmup"),
              ("--from", "remap_from"), ("--comm-timeout", "comm_timeout"), ("--dist-backend", "dist_backend"))


class RunFailed(DmlprofError):
    """A distributed run in which some rank failed; its exit code is the blamed rank's where that is one of
    dmlprof's (2 for a session that could not be written, 3 for the model, ...), else 3."""

    exit_code = 3

    def __init__(self, message: str, exit_code: int = 3):
        super().__init__(message)
        self.exit_code = exit_code if exit_code in DMLPROF_EXIT_CODES else 3


#: the exit codes a rank's own dmlprof error ends with (docs/exit_codes.md); anything else is a crash
DMLPROF_EXIT_CODES = (2, 3, 4, 5, 130, 143)


def rank_argv(args) -> List[str]:
    """``dmlprof scan`` arguments of one rank: the parent's, less ``--nproc``, the outputs the parent writes."""
    argv = ["scan", "-m", args.module] if getattr(args, "module", None) else ["scan", str(args.model)]
    for flag, attribute in _FORWARDED:
        value = getattr(args, attribute, None)
        if value is not None:
            argv += [flag, str(value)]
    if not args.sync:
        argv.append("--no-sync")
    if not args.profiler:
        argv.append("--no-profiler")
    if getattr(args, "run_to_end", False):
        argv.append("--run-to-end")
    if getattr(args, "tb", None):
        argv += ["--tb", str(args.tb)]
    argv.append("--quiet")
    if args.script_args:
        argv += ["--"] + list(args.script_args)
    return argv


def launch(args) -> int:
    """Run ``args.nproc`` ranks through torch.distributed.run; print the merged report or one error line."""
    from dmlprof.job.report import print_run
    from dmlprof.model_file import inspect_model_file

    from dmlprof.output import check_paths, script_output_to_stderr
    from dmlprof.files import make_new_dir

    if not 1 <= args.nproc <= MAX_LOCAL_RANKS:
        raise UsageError(f"--nproc must be from 1 to {MAX_LOCAL_RANKS}")
    refuse_single_scan_options(args, "--nproc")
    check_paths(args, inputs=[args.model])
    model_file = inspect_model_file(args.model)
    backend = _backend_name(args.device)
    stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    try:  # a folder of its own: never one another run (or another user) created first
        folder = make_new_dir(Path(args.out or "reports") / run_dir_name(str(model_file.path), backend, args.nproc,
                                                                         stamp))
    except OSError as exc:
        raise UsageError(f"cannot create the run folder under {args.out or 'reports'}: {exc.strerror or exc}") from None
    with script_output_to_stderr(args):  # --json -: the ranks' prints must not mix with the report
        failures = _run_torchrun(args, folder)
    if failures:
        line, code = failure_line(folder, args.nproc, failures)
        raise RunFailed(line, code) from None
    print_run(folder, args)
    return 0


def _backend_name(device: str) -> str:
    """The backend the ranks will use, checked here without preparing it (the ranks do; the emulated
    device would be built once more in this process for nothing)."""
    from dmlprof.backends import backend_class, resolve_backend
    from dmlprof.errors import DeviceError

    if device == "auto":
        return resolve_backend("auto").name
    status = backend_class(device).availability()
    if not status.available:
        raise DeviceError(f"device {device!r} is not available: {status.reason}")
    return device


def _run_torchrun(args, folder: Path) -> Dict[int, int]:
    """{rank: exit code} of the ranks that failed (empty when all succeeded)."""
    from torch.distributed.run import config_from_args, parse_args

    try:
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import elastic_launch
    except ImportError as exc:  # a torch without torch.distributed (some macOS/Windows builds)
        raise UsageError(f"--nproc needs torch.distributed, which this torch lacks ({exc})") from None
    # What ``torchrun --standalone`` sets up: a rendezvous of its own on a free local port.
    run_id = str(uuid.uuid4())
    torchrun_argv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--rdzv-id", run_id,
                     "--nproc-per-node", str(args.nproc), "-m", "dmlprof"] + rank_argv(args)
    # OMP_NUM_THREADS=1 as torchrun would set it (it warns when it does), unless the user chose.
    with _environment({RUN_DIR_ENV: str(folder), PARENT_ENV: "1", RUN_ID_ENV: run_id,
                       "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}), \
            _quiet_elastic_logs():
        config, command, command_args = config_from_args(parse_args(torchrun_argv))
        try:
            elastic_launch(config=config, entrypoint=command)(*command_args)
        except ChildFailedError as exc:
            return {int(rank): int(failure.exitcode) for rank, failure in exc.failures.items()}
    return {}


@contextlib.contextmanager
def _environment(values: dict):
    """Variables every rank inherits (NCCL/NVSHMEM switches in PASS_THROUGH_ENV pass through untouched)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _quiet_elastic_logs():
    """torchrun's agent logs each failure at length; the one line below says what matters."""
    logger = logging.getLogger("torch.distributed")
    saved = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(saved)


def failure_line(folder: Path, world_size: int, failures: Dict[int, int]) -> tuple:
    """(one line: the rank to blame and why, then which ranks' sessions were kept; the run's exit code)."""
    from dmlprof.job.rank import ERROR_NAME

    lines, hung, codes = {}, {}, {}
    for rank in range(world_size):
        path = Path(folder) / ERROR_NAME.format(rank=rank)
        try:
            import json

            data = json.loads(path.read_text(encoding="utf-8"))
            lines[rank] = str(data["line"])[:2000]
            hung[rank] = bool(data.get("hung"))
            codes[rank] = 3 if hung[rank] else int(data.get("exit_code", 3))  # a hang is the model's failure
        except (OSError, ValueError, KeyError, TypeError):
            continue
    unwritable = _cannot_write(folder) if any(r not in lines for r in failures) else None
    if unwritable:  # the ranks could not even write their error lines: that is the run's one error
        return f"cannot write in the run folder {folder} ({unwritable}); the ranks could not save their sessions", 2
    cause, blamed = _cause(failures, lines, hung)
    from dmlprof.job.rank import write_error

    for rank, code in failures.items():  # a rank that died wrote no line: the report should still say why
        if rank not in lines and code != 0:
            write_error(folder, rank, f"died ({_exit_text(code)})", code)
    kept = [r for r in range(world_size) if session_path(folder, r).exists()]
    kept_text = f"sessions of rank{'s' if len(kept) != 1 else ''} {', '.join(map(str, kept))} kept" if kept else "no session kept"
    code = codes.get(blamed, failures.get(blamed, 3)) if blamed is not None else 3
    return f"{cause}; {kept_text} in {folder} (dmlprof report {folder})", code


def _cannot_write(folder: Path):
    """Why nothing can be written in ``folder`` (a full disk, a read-only folder), or None when a write works."""
    from dmlprof.files import write_new

    try:
        probe = write_new(Path(folder) / ".write-probe", "dmlprof checks the folder can be written\n")
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        probe.unlink()
    except OSError:
        pass
    return None


def _cause(failures: Dict[int, int], lines: Dict[int, str], hung: Dict[int, bool]) -> tuple:
    """(what to say first: a rank that died, a hang, a rank's own error, in that order; the rank it blames)."""
    stopped = "stopped by the launcher"
    # the launcher stops the other ranks with SIGTERM once one fails: a rank it stopped before that rank
    # could write its line is not the cause, so a death by any other signal or status is named first
    launcher_stop = -int(signal.SIGTERM)
    for rank, code in sorted(failures.items(), key=lambda item: (item[1] == launcher_stop, item[0])):
        if rank not in lines and code != 0:
            return f"rank {rank} died ({_exit_text(code)})", None
    for rank, line in sorted(lines.items()):
        if hung.get(rank):
            return line, rank
    for rank, line in sorted(lines.items()):
        if stopped not in line:
            return (f"rank {rank}: {line}" if not line.startswith("rank ") else line), rank
    if lines:
        rank = min(lines)
        return f"rank {rank}: {lines[rank]}", rank
    rank, code = min(failures.items())
    return f"rank {rank} failed ({_exit_text(code)})", None


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
