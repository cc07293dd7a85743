"""A rank's trace: the session's Chrome trace, marked as one rank of a distributed run.

Built on :func:`dmlprof.render.trace.trace_dict` (every call, steps, phases,
fallback marks) with what Holistic Trace Analysis and TensorBoard's profiler
plugin read as "one rank of a distributed run":

- ``distributedInfo`` (``backend``, ``rank``, ``world_size``), as torch.profiler
  writes it;
- each collective's own execution as a ``gloo:all_reduce``-style range
  (``cat: "user_annotation"``, as torch writes them) on a lane of its own, where
  the profiler measured it: those names are what the plugin's distributed view
  counts as communication.

Layout: ``DIR/<run>/rank<N>.<timestamp>.pt.trace.json``, one worker per rank.
"""
from __future__ import annotations

import json
from pathlib import Path

from dmlprof.distributed.annotate import columns_frame, profiler_distributed_info
from dmlprof.record.collectives import COLLECTIVE_COLUMNS
from dmlprof.errors import UsageError
from dmlprof.files import write_atomic
from dmlprof.meta import Distributed, RunMeta
from dmlprof.render.trace import PID, _timestamp_ms, _us, trace_dict

#: the lane (tid) the collectives' own ranges are drawn on; calls use 1, 2, ...
COMM_TID = 1000


def distributed_info(meta: RunMeta) -> dict:
    """``distributedInfo`` as torch.profiler writes it, from a rank session's metadata."""
    return profiler_distributed_info(meta.distributed or Distributed())


def rank_trace_dict(session) -> dict:
    """The session's trace plus ``distributedInfo`` and the collectives' ranges."""
    # first, and written as torch writes it ("rank": 0): Holistic Trace Analysis finds a file's rank
    # with the pattern '"rank":\s+(\d+)', the first match in the file
    trace = {"distributedInfo": distributed_info(session.meta), **trace_dict(session)}
    calls = columns_frame(session.collectives, COLLECTIVE_COLUMNS)
    timed = calls.dropna(subset=["comm_start_ns", "comm_time_ns"]) if len(calls) else calls
    if len(timed):
        backend = trace["distributedInfo"]["backend"]
        prefix = backend if backend in ("gloo", "nccl") else "gloo"
        trace["traceEvents"].append({"ph": "M", "name": "thread_name", "pid": PID, "tid": COMM_TID, "ts": 0,
                                     "args": {"name": f"{prefix} collectives"}})
        for row in timed.itertuples(index=False):
            trace["traceEvents"].append({
                "ph": "X", "cat": "user_annotation", "name": f"{prefix}:{row.collective}", "pid": PID, "tid": COMM_TID,
                "ts": _us(int(row.comm_start_ns)), "dur": round(int(row.comm_time_ns) / 1000.0, 3),
                "args": {"op": row.op, "bytes": int(row.bytes or 0), "step": int(row.step), "External id": int(row.seq) + 1},
            })
    return trace


def write_rank_trace(session, log_dir, run: str) -> Path:
    """Write ``log_dir/<run>/rank<N>.<timestamp>.pt.trace.json``; returns its path."""
    trace = rank_trace_dict(session)
    rank = trace["distributedInfo"]["rank"]
    folder = Path(log_dir) / run
    path = folder / f"rank{rank}.{_timestamp_ms(session.meta)}.pt.trace.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob(f"rank{rank}.*.pt.trace.json"):  # one trace per rank and run
            if stale != path:
                stale.unlink()
        write_atomic(path, json.dumps(trace, separators=(",", ": "), ensure_ascii=False, allow_nan=False))
    except OSError as exc:
        raise UsageError(f"cannot write the trace under {folder}: {exc.strerror or exc}") from None
    return path
