"""Collectives: which dispatcher calls are communication, and what each one cost.

torch.distributed's collectives reach the dispatcher as ops of their own
(``c10d::allreduce_``, ``c10d::broadcast_``, functional ``_c10d_functional::all_reduce``),
on torch 2.4.1 and 2.13 alike, and DDP's bucketed all-reduce is one
``c10d::allreduce_`` per bucket, issued from autograd hooks during backward.
The recorder sees them like any op; :func:`comm_phase` makes them a phase of
their own. The call itself only hands the work to the process group: on gloo
the collective then runs on one of gloo's worker threads, which torch.profiler
records as ``gloo:all_reduce`` (its whole duration, including the wait for the
other ranks); on NCCL it is a kernel, which the profiler joins to the call as
device time. :func:`collectives_frame` turns both into one per-call table.
"""
from __future__ import annotations

from collections import defaultdict, deque

import pandas as pd

from dmlprof.schema import COMM as COMM_PHASE  # the phase vocabulary lives once, in the schema
#: dispatcher namespaces whose ops are communication (classic and functional collectives)
COMM_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional"})
#: ops in those namespaces that move no data (bookkeeping around functional collectives)
_NOT_COMMUNICATION = frozenset({"_wrap_tensor_autograd"})
#: profiler range prefixes of the process-group backends' own collective events
BACKEND_EVENT_PREFIXES = ("gloo:", "nccl:")

# Dispatcher op (without namespace and overload) -> the collective it performs,
# spelled as gloo and NCCL name their profiler ranges ("gloo:all_reduce").
_COLLECTIVE_OF = {
    "allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce", "all_reduce": "all_reduce",
    "all_reduce_": "all_reduce", "all_reduce_coalesced": "all_reduce", "all_reduce_coalesced_": "all_reduce",
    "broadcast_": "broadcast", "broadcast": "broadcast",
    "allgather_": "all_gather", "_allgather_base_": "all_gather", "allgather_coalesced_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather", "all_gather_into_tensor": "all_gather",
    "all_gather_into_tensor_out": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_": "reduce",
    "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall_": "all_to_all", "alltoall_base_": "all_to_all", "all_to_all_single": "all_to_all",
    "gather_": "gather", "scatter_": "scatter", "barrier": "barrier", "monitored_barrier_": "barrier",
    "send": "send", "recv_": "recv", "recv_any_source_": "recv", "wait_tensor": "wait",
}
# Ops named (output, input) at their top level: the payload is the input.
_OUTPUT_FIRST = frozenset({"_allgather_base_", "_reduce_scatter_base_", "all_gather_into_tensor_out"})

COLLECTIVE_COLUMNS = ("seq", "step", "op", "collective", "bytes", "start_ns", "call_time_ns", "comm_start_ns",
                      "comm_time_ns", "comm_source", "module", "source", "thread")


def comm_phase(func):
    """``"comm"`` when ``func`` is a collective (the recorder makes it a phase of its own), else None.

    The one place that decides what counts as communication.
    """
    if func.namespace in COMM_NAMESPACES and func._schema.name.split("::", 1)[-1] not in _NOT_COMMUNICATION:
        return COMM_PHASE
    return None


def short_name(op: str) -> str:
    """``c10d::allreduce_.default`` -> ``allreduce_``."""
    return op.split("::", 1)[-1].split(".", 1)[0]


def collective_of(op: str) -> str:
    """The collective an op performs (``all_reduce``), or its own short name when unknown."""
    name = short_name(op)
    return _COLLECTIVE_OF.get(name, name.strip("_"))


def payload_bytes(op: str, shapes: str, dtypes: str) -> int:
    """Bytes a rank hands to the collective, from the op frame's ``shapes`` and ``dtypes`` of the call.

    All top-level tensors for in-place collectives (all_reduce, broadcast: the
    buffer, or the list of buffers); the input alone for ops named (output,
    input). Nested lists (all_gather's outputs) are not in ``shapes``.
    None when the call mixes dtypes (no collective does).
    """
    import json
    import math

    kinds = [d for d in str(dtypes).split(",") if d]
    try:
        sizes = [math.prod(int(n) for n in shape) for shape in json.loads(shapes or "[]")]
    except (ValueError, TypeError):
        return 0
    if len(kinds) != 1 or not sizes:
        return 0
    if short_name(op) in _OUTPUT_FIRST and len(sizes) >= 2:
        sizes = sizes[-1:]
    return sum(sizes) * _itemsize(kinds[0])


def _itemsize(dtype: str) -> int:
    import torch

    found = getattr(torch, dtype, None)
    if isinstance(found, torch.dtype):
        return torch.empty((), dtype=found).element_size()
    return 0


def backend_events(events: pd.DataFrame) -> pd.DataFrame:
    """The process-group backends' own collective ranges (``gloo:all_reduce``), in start order."""
    if events is None or events.empty:
        return pd.DataFrame(columns=["name", "start_ns", "time_ns", "device_time_ns", "thread"])
    mask = events["name"].str.startswith(BACKEND_EVENT_PREFIXES)
    return events[mask].sort_values("start_ns", kind="stable").reset_index(drop=True)


def collectives_frame(ops: pd.DataFrame, events) -> pd.DataFrame:
    """One row per collective call: bytes, the call's own time and the collective's time.

    ``events`` is the profiler's host-event frame (None without the profiler).
    ``comm_time_ns`` is the collective's duration as torch.profiler saw it:
    the backend's own range (gloo runs collectives on worker threads): for each
    call, in order, the first range of its collective that starts after the
    call does; else the kernel time joined to the call (NCCL); else null
    (``comm_source`` says which).
    """
    calls = ops[ops["phase"] == COMM_PHASE]
    if calls.empty:
        return pd.DataFrame(columns=list(COLLECTIVE_COLUMNS))
    ranges, call_starts = _event_queues(events, calls["op"].map(lambda op: op.split(".", 1)[0]).value_counts())
    rows = []
    for row in calls.itertuples(index=False):
        collective = collective_of(row.op)
        call_start = call_starts[row.op.split(".", 1)[0]]
        call_start = call_start.popleft() if call_start else None
        comm_start = comm_ns = None
        where = ""
        queue = ranges.get(collective)
        while queue and call_start is not None and queue[0][0] < call_start:
            queue.popleft()  # the range of a call made while nothing was recorded (a script's warm-up)
        if queue:
            range_start, comm_ns = queue.popleft()
            where = "backend range"
            if call_start is not None:  # on our clock: the call's start plus the profiler's offset
                comm_start = int(row.start_ns) + range_start - call_start
        elif not pd.isna(row.device_time_ns):
            comm_ns, where = int(row.device_time_ns), "kernel"
        rows.append((int(row.seq), int(row.step), row.op, collective, payload_bytes(row.op, row.shapes, row.dtypes),
                     int(row.start_ns), int(row.time_ns), comm_start, comm_ns, where, row.module, row.source,
                     int(row.thread)))
    frame = pd.DataFrame(rows, columns=list(COLLECTIVE_COLUMNS))
    for column in ("comm_start_ns", "comm_time_ns"):
        frame[column] = pd.array(frame[column], dtype="Int64")
    return frame


def _event_queues(events, rows_per_op) -> tuple:
    """({collective: deque of (start, duration)} of the backend's ranges, {op: deque of call starts}).

    The profiler shows each recorded call twice, nested; the calls a run
    recorded and then dropped (a script's set-up and warm-up steps) are among
    them, always before the kept ones: each op keeps its last ``rows_per_op[op]``.
    """
    ranges, call_starts = defaultdict(deque), defaultdict(deque)
    if events is None or events.empty:
        return ranges, call_starts
    for name, start, duration in zip(*(backend_events(events)[c] for c in ("name", "start_ns", "time_ns"))):
        ranges[name.split(":", 1)[1]].append((int(start), int(duration)))
    from dmlprof.record.profiler import recorded_call_events

    calls = recorded_call_events(events)
    calls = calls[calls["name"].str.split("::").str[0].isin(COMM_NAMESPACES)]
    for name, group in calls.groupby("name", sort=False):
        kept = int(rows_per_op.get(name, 0))
        call_starts[name].extend(int(start) for start in group["start_ns"].tolist()[-kept:] if kept)
    return ranges, call_starts
