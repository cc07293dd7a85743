"""What a session recorded in a launched job carries beyond a plain one.

``meta.distributed`` (a :class:`~dmlprof.meta.Distributed`): rank, local rank, world size, local world size,
node rank and the process-group backend; ``extras["collectives"]``: one row
per collective call (columns as lists; see docs/distributed.md). And beside
the session, torch.profiler's own trace of the rank (Kineto's export, with
``distributedInfo``), for Holistic Trace Analysis and for checking dmlprof's
figures against the profiler's.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Optional

import pandas as pd

from dmlprof.record.collectives import BACKEND_EVENT_PREFIXES, backend_events, collectives_frame
from dmlprof.distributed.env import RUN_DIR_ENV, rank_info
from dmlprof.errors import UsageError
from dmlprof.meta import Distributed

#: torch.profiler's own per-rank traces, under the run folder
PROFILER_DIR = "profiler"


def annotate(session, events, profiler=None) -> None:
    """Add rank metadata and the collectives table to a session (in place; nothing outside a job).

    ``events`` is the profiler's host-event frame of the recorded steps, or
    None; ``profiler`` the ProfilerAlongside that recorded them, whose own
    trace is exported into the run folder. Called once, where the runner
    builds the session.
    """
    try:
        info = rank_info()
    except UsageError:
        info = None
    calls = collectives_frame(session.ops, events)
    if info is None and calls.empty:
        return
    place = info.as_record() if info is not None else Distributed()
    backend = process_group_backend(events)
    record = replace(place, backend=str(backend) if backend is not None else None, collective_calls=int(len(calls)),
                     comm_timing=_comm_timing(calls, events))
    session.meta = session.meta.updated(distributed=record)
    session.collectives = frame_columns(calls)
    if info is not None and profiler is not None and profiler.profile is not None and os.environ.get(RUN_DIR_ENV):
        note = export_profiler_trace(profiler.profile, Path(os.environ[RUN_DIR_ENV]), record)
        if note is not None:
            session.meta = session.meta.updated(notes=session.meta.notes + (note,))


def profiler_trace_path(folder: Path, rank: int) -> Path:
    return Path(folder) / PROFILER_DIR / f"rank{int(rank)}.pt.trace.json"


def profiler_distributed_info(place: Distributed) -> dict:
    """``distributedInfo`` as torch.profiler writes it, from a rank's place in its job."""
    return {"backend": str(place.backend or "unknown"), "rank": int(place.rank or 0),
            "world_size": int(place.world_size if place.world_size is not None else 1)}


def export_profiler_trace(profile, folder: Path, place: Distributed) -> Optional[str]:
    """torch.profiler's own trace of this rank, with ``distributedInfo`` even where the
    process group started after the profiler (a script's own init_process_group).

    Kineto writes to the name it is given, following symlinks: it writes into a private temporary
    folder, and the trace reaches the run folder through :func:`dmlprof.files.write_atomic`.
    """
    import json
    import tempfile

    from dmlprof.files import write_atomic
    from dmlprof.record.profiler import quiet_native_stderr

    path = profiler_trace_path(folder, place.rank or 0)
    try:
        with tempfile.TemporaryDirectory(prefix="dmlprof-trace-") as private:
            exported = Path(private) / path.name
            with quiet_native_stderr():
                profile.export_chrome_trace(str(exported))
            trace = json.loads(exported.read_text(encoding="utf-8"))
        trace.setdefault("distributedInfo", profiler_distributed_info(place))
        write_atomic(path, json.dumps(trace))
    except (OSError, RuntimeError, ValueError) as exc:  # the session's note, for the rank's report
        return f"torch.profiler's trace of this rank could not be written: {exc}"[:300]
    return None


def process_group_backend(events):
    """``gloo``/``nccl``/...: the default group's backend while it exists, else read off the profiler's ranges."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return str(dist.get_backend())
    except (ImportError, RuntimeError, ValueError):
        pass
    names = backend_events(events)["name"] if events is not None else []
    for prefix in BACKEND_EVENT_PREFIXES:
        if any(str(n).startswith(prefix) for n in names):
            return prefix.rstrip(":")
    return None


def _comm_timing(calls: pd.DataFrame, events) -> str:
    if calls.empty:
        return "no collectives"
    if events is None:
        return "host time of each call only (--no-profiler: the collectives' own time was not measured)"
    return ("comm_time_ns: the backend's own range for the collective in torch.profiler (gloo's worker threads, "
            "including the wait for the other ranks), or the kernel time (NCCL)")


def frame_columns(frame: pd.DataFrame) -> dict:
    """A frame as {column: [values]} with nulls as None (JSON-ready)."""
    return {c: frame[c].astype(object).where(frame[c].notna(), None).tolist() for c in frame.columns}


def columns_frame(columns: dict, names) -> pd.DataFrame:
    """Inverse of :func:`frame_columns` for the given column names (missing ones empty)."""
    columns = columns if isinstance(columns, dict) else {}
    length = max((len(v) for v in columns.values() if isinstance(v, list)), default=0)
    return pd.DataFrame({name: (columns.get(name) if isinstance(columns.get(name), list) else [None] * length)
                         for name in names})
