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

from dmlprof.distributed.env import PARENT_ENV, PASS_THROUGH_ENV, RUN_DIR_ENV, run_dir_name, session_path
from dmlprof.errors import DmlprofError, UsageError

# Options of ``dmlprof scan`` forwarded to every rank as given (name, attribute).
_FORWARDED = (("--device", "device"), ("--batch-size", "batch_size"), ("--steps", "steps"), ("--warmup", "warmup"),
              ("--from", "remap_from"), ("--comm-timeout", "comm_timeout"), ("--dist-backend", "dist_backend"))


class RunFailed(DmlprofError):
    """A distributed run in which some rank failed."""

    exit_code = 3


def rank_argv(args) -> List[str]:
    """``dmlprof scan`` arguments of one rank: the parent's, less ``--nproc``, the outputs the parent writes."""
    argv = ["scan", str(args.model)]
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
    from dmlprof.distributed.report import print_run
    from dmlprof.model_file import inspect_model_file

    if args.nproc < 1:
        raise UsageError("--nproc must be at least 1")
    for flag, name in ((args.target, "--target"), (args.replace, "--replace"), (args.verify, "--verify")):
        if flag:
            raise UsageError(f"{name} does not combine with --nproc (one scan per rank)")
    model_file = inspect_model_file(args.model)
    backend = _backend_name(args.device)
    stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    folder = Path(args.out or "reports") / run_dir_name(str(model_file.path), backend, args.nproc, stamp)
    folder.mkdir(parents=True, exist_ok=True)
    failures = _run_torchrun(args, folder)
    if failures:
        raise RunFailed(failure_line(folder, args.nproc, failures), remedy=None) from None
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
    torchrun_argv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--rdzv-id", str(uuid.uuid4()),
                     "--nproc-per-node", str(args.nproc), "-m", "dmlprof"] + rank_argv(args)
    # OMP_NUM_THREADS=1 as torchrun would set it (it warns when it does), unless the user chose.
    with _environment({RUN_DIR_ENV: str(folder), PARENT_ENV: "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}), \
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


def failure_line(folder: Path, world_size: int, failures: Dict[int, int]) -> str:
    """One line: the rank to blame and why, then which ranks' sessions were kept."""
    from dmlprof.distributed.rank import ERROR_NAME

    lines, hung = {}, {}
    for rank in range(world_size):
        path = Path(folder) / ERROR_NAME.format(rank=rank)
        try:
            import json

            data = json.loads(path.read_text(encoding="utf-8"))
            lines[rank] = str(data["line"])
            hung[rank] = bool(data.get("hung"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    cause = _cause(failures, lines, hung)
    from dmlprof.distributed.rank import write_error

    for rank, code in failures.items():  # a rank that died wrote no line: the report should still say why
        if rank not in lines and code != 0:
            write_error(folder, rank, f"died ({_exit_text(code)})", code)
    kept = [r for r in range(world_size) if session_path(folder, r).exists()]
    kept_text = f"sessions of rank{'s' if len(kept) != 1 else ''} {', '.join(map(str, kept))} kept" if kept else "no session kept"
    return f"{cause}; {kept_text} in {folder} (dmlprof report {folder})"


def _cause(failures: Dict[int, int], lines: Dict[int, str], hung: Dict[int, bool]) -> str:
    """What to say first: a rank that died, a hang, a rank's own error, in that order."""
    stopped = "stopped by the launcher"
    for rank, code in sorted(failures.items()):
        if rank not in lines and code != 0:
            return f"rank {rank} died ({_exit_text(code)})"
    for rank, line in sorted(lines.items()):
        if hung.get(rank):
            return line
    for rank, line in sorted(lines.items()):
        if stopped not in line:
            return f"rank {rank}: {line}" if not line.startswith("rank ") else line
    if lines:
        rank = min(lines)
        return f"rank {rank}: {lines[rank]}"
    rank, code = min(failures.items())
    return f"rank {rank} failed ({_exit_text(code)})"


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
