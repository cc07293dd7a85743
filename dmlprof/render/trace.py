"""A Session as a Chrome trace that TensorBoard's PyTorch profiler plugin reads.

:func:`write_tensorboard_run` writes ``DIR/<run>/<worker>.<timestamp>.pt.trace.json``
— the layout ``torch.profiler.tensorboard_trace_handler`` uses and
torch-tb-profiler 0.4.3 looks for. The same file is plain Chrome-trace JSON, so
Perfetto and chrome://tracing open it too.

What goes in (all ``ph: "X"`` complete events, times in microseconds):

- every op call as ``cat: "cpu_op"`` (the plugin's Operator view aggregates
  only these), with its shapes, dtypes, module and source in ``args``; the
  source and module path become the ``Call stack`` the plugin shows;
- one ``ProfilerStep#N`` range per step (``cat: "user_annotation"``, as torch
  writes it), which the plugin uses to split steps;
- phase ranges ``dmlprof::forward|backward|optimizer`` (``user_annotation``:
  Trace view only);
- around every call that fell back, a range named ``fallback::aten::X`` (the op
  the backend sent to the CPU). It is written with ``cat: "cpu_op"`` rather than
  ``user_annotation`` on purpose: the plugin drops ``user_annotation`` ranges
  from its Operator view, and there a ``fallback::`` row with its call count and
  total time is exactly what a reader needs. Its self time is zero (the op call
  inside covers it), so no time is counted twice in self-time totals;
- the scanned code's own ``record_function`` ranges (``user_annotation``), on a process of their own
  (``your record_function ranges``), one thread each as the calls': each spans the recorded calls
  torch.profiler found inside it, from the first one's start to the last one's end. Beside dmlprof's
  phase ranges they could intersect (a range around forward and backward), which the plugin rejects.

:func:`trace_json` is the same trace as one plain file (``scan --trace FILE``)
for Perfetto or chrome://tracing, plus, where torch.profiler measured kernel
time (CUDA), a ``device kernels`` lane: each call's kernel time as one range; and a
``fallbacks to the CPU`` lane repeating every call that fell back, so they stand apart at a glance
(fallback ranges carry chrome://tracing's ``terrible`` colour, red, wherever they are drawn).
The recorder keeps a call's kernel time, not when each kernel ran, so the range
is drawn at the end of its call: with the device synchronised after every call
(the default) the call ends when its kernels do. Under ``--no-sync`` kernels
queue: each range starts when its call did or when the one before it ended.
"""
from __future__ import annotations

import json
import re
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import pandas as pd

from dmlprof.errors import UsageError
from dmlprof.files import fit_name, make_new_dir, write_atomic
from dmlprof.meta import RunMeta
from dmlprof.schema import FALLBACK, parse_fallback_ops, parse_ranges

#: What torch.profiler writes today (Kineto's trace schema version).
SCHEMA_VERSION = 1
FALLBACK_PREFIX = "fallback::"
PHASE_PREFIX = "dmlprof::"
#: pid for every event: one process, as in a torch.profiler trace of one worker
PID = 1
#: the pid and tid of the device kernels' lane in a --trace file
KERNEL_PID, KERNEL_TID = 2, 1
KERNEL_LANE = "device kernels"
#: the fallbacks' own lane in a --trace file: every call that ran on the CPU, apart, at a glance
FALLBACK_PID, FALLBACK_TID = 3, 1
FALLBACK_LANE = "fallbacks to the CPU"
#: the scanned code's record_function ranges: a process of their own, a thread per thread of calls
RANGE_PID = 4
RANGE_LANE = "your record_function ranges"
#: chrome://tracing's reserved colour for what went wrong (its "cname" names), on every fallback range
FALLBACK_COLOUR = "terrible"
_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
# Consumers add ts + dur in floating-point microseconds, so ranges that share an
# end would intersect by a rounding error: phase ranges end 1 ns, step ranges
# 2 ns after their last call, and calls on one thread are kept 3 ns apart.
_GAP_NS = 3
_PHASE_PAD_NS = 1
_STEP_PAD_NS = 2


def refuse_untimed(session) -> None:
    """Raise :class:`~dmlprof.errors.UsageError` when the session has no timed calls (a prediction, an empty run):
    a command asked for a trace checks this before it renders anything else."""
    ops = session.ops
    if ops is None or not len(ops) or int(ops["time_ns"].sum()) <= 0:
        raise UsageError("this session has no timed op calls, so there is no trace to write",
                         remedy="a prediction has no per-call times: scan on the device for a trace, or "
                                "--device emulated-dml for the host CPU's")


def trace_dict(session, kernels: bool = False) -> dict:
    """The trace as a dict (``traceEvents`` and the metadata the plugin reads); ``kernels``: with the
    device kernels' lane where kernel time was measured (the --trace file).

    Raises :class:`~dmlprof.errors.UsageError` when the session has no timed
    calls (a prediction without times, an empty run): there is nothing to draw.
    """
    refuse_untimed(session)
    ops = session.ops
    run = session.meta
    frame = _laid_out(ops)
    events = _metadata_events(run, frame)
    events += _step_events(frame)
    events += _phase_events(frame)
    events += _op_events(frame)
    events += _range_events(frame)
    events += (_kernel_events(run, frame) + _fallback_lane(frame)) if kernels else []
    return {
        "schemaVersion": SCHEMA_VERSION,
        # no CUDA device properties: torch writes [] for a CPU-only trace too
        "deviceProperties": [],
        "displayTimeUnit": "ms",
        "traceName": f"dmlprof {run.model_name or 'session'}",
        "dmlprof": {
            "version": run.environment.dmlprof_version or "",
            "backend": run.device.backend or "",
            "device_name": run.device.name or "",
            "mode": run.kind,
            "model": run.model or "",
            "timing": run.recording.timing or "",
            "partial": run.partial,
        },
        "traceEvents": events,
    }


def _laid_out(ops: pd.DataFrame) -> pd.DataFrame:
    """Calls sorted per thread, with end times trimmed so no two calls on one thread overlap.

    The plugin nests events by time containment and rejects ranges that
    intersect; recorded calls never overlap, but rounding to microseconds (or a
    clock hiccup) must not make them.
    """
    frame = ops[["seq", "step", "phase", "op", "verdict", "fallback_ops", "fallback_calls", "module", "source",
                 "dtypes", "shapes", "start_ns", "time_ns", "device_time_ns", "bytes_moved", "transfer", "thread", "ranges"]].copy()
    frame = frame.sort_values(["thread", "start_ns", "seq"], kind="stable").reset_index(drop=True)
    start = frame["start_ns"].astype("int64")
    end = start + frame["time_ns"].clip(lower=0).astype("int64")
    next_start = start.shift(-1)
    same_thread = frame["thread"].eq(frame["thread"].shift(-1))
    # leave _GAP_NS between neighbours: enclosing ranges end 1 and 2 ns after
    # their last call, and must still end before the next call starts
    limit = (next_start - _GAP_NS).where(same_thread)
    end = end.where(limit.isna() | (end <= limit), limit).astype("int64")
    frame["end_ns"] = end.where(end >= start, start)
    return frame


def _us(ns) -> float:
    return round(int(ns) / 1000.0, 3)


def _tid(thread) -> int:
    # tid 0 is where Kineto puts process metadata; threads start at 1
    return int(thread) + 1


def _metadata_events(run: RunMeta, frame) -> list:
    name = f"dmlprof: {run.model_name or 'model'} on {run.device.backend or 'device'}"
    events = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "ts": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_labels", "pid": PID, "tid": 0, "ts": 0, "args": {"labels": "CPU"}},
    ]
    for thread in sorted(frame["thread"].unique()):
        label = "main thread" if int(thread) == 0 else f"thread {int(thread)} (autograd or worker)"
        events.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": _tid(thread), "ts": 0, "args": {"name": label}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": _tid(thread), "ts": 0,
                       "args": {"sort_index": int(thread)}})
    return events


def _step_events(frame) -> list:
    """One ProfilerStep#N per step on the main thread, spanning the step's calls on every thread."""
    main = _tid(frame["thread"].min())
    events = []
    spans = frame.groupby("step", sort=True).agg(start=("start_ns", "min"), end=("end_ns", "max"))
    previous_end = None
    for step, row in spans.iterrows():
        start, end = int(row["start"]), int(row["end"]) + _STEP_PAD_NS
        if previous_end is not None and start <= previous_end:
            start = previous_end + 1  # steps must not intersect either
        end = max(end, start)
        previous_end = end
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{int(step)}", "pid": PID, "tid": main,
                       "ts": _us(start), "dur": round(_us(end) - _us(start), 3), "args": {"step": int(step)}})
    return events


def _phase_events(frame) -> list:
    """Contiguous runs of one phase on one thread, as ranges (Trace view and Perfetto only)."""
    events = []
    for thread, calls in frame.groupby("thread", sort=True):
        run_id = (calls["phase"].ne(calls["phase"].shift()) | calls["step"].ne(calls["step"].shift())).cumsum()
        runs = calls.groupby(run_id, sort=False).agg(phase=("phase", "first"), step=("step", "first"),
                                                    start=("start_ns", "min"), end=("end_ns", "max"), calls=("seq", "size"))
        for run in runs.itertuples():
            if not run.phase:
                continue
            events.append({"ph": "X", "cat": "user_annotation", "name": f"{PHASE_PREFIX}{run.phase}", "pid": PID,
                           "tid": _tid(thread), "ts": _us(run.start), "dur": round(_us(run.end + _PHASE_PAD_NS) - _us(run.start), 3),
                           "args": {"step": int(run.step), "calls": int(run.calls)}})
    return events


def _range_events(frame) -> list:
    """The scanned code's ``record_function`` ranges (see the module docstring). Nested ranges that end
    with the same call end 1 ns apart per level, the outer later (up to the gap before the next call), so
    that no two intersect."""
    inside = frame[frame["ranges"] != ""]
    if inside.empty:
        return []
    spans: dict = {}  # (thread, depth, name, occurrence) -> [start, end, calls]
    deepest = 0
    for thread, text, start, end in zip(inside["thread"], inside["ranges"], inside["start_ns"], inside["end_ns"]):
        ranges = parse_ranges(text)
        deepest = max(deepest, len(ranges))
        for depth, (name, number) in enumerate(ranges):
            span = spans.setdefault((int(thread), depth, name, number), [int(start), int(end), 0])
            span[0], span[1], span[2] = min(span[0], int(start)), max(span[1], int(end)), span[2] + 1
    events = [{"ph": "M", "name": "process_name", "pid": RANGE_PID, "tid": 0, "ts": 0, "args": {"name": RANGE_LANE}}]
    for thread in sorted({key[0] for key in spans}):
        events.append({"ph": "M", "name": "thread_name", "pid": RANGE_PID, "tid": _tid(thread), "ts": 0,
                       "args": {"name": "main thread" if thread == 0 else f"thread {thread}"}})
    for (thread, depth, name, number), (start, end, calls) in sorted(spans.items(), key=lambda item: item[1][0]):
        end += min(deepest - depth, _GAP_NS - 1)  # never into the next call's range (deeper ones share an end)
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": RANGE_PID, "tid": _tid(thread),
                       "ts": _us(start), "dur": round(_us(end) - _us(start), 3),
                       "args": {"occurrence": number, "recorded calls": calls}})
    return events


def fallback_range_name(op: str, fallback_ops: str) -> str:
    """``fallback::aten::X`` for a call: the inner op(s) the backend ran on the CPU, most calls first."""
    inner = Counter(parse_fallback_ops(fallback_ops))
    names = [name for name, _ in inner.most_common()] or [op]
    return FALLBACK_PREFIX + "+".join(names)


def _call_stack(source: str, module: str) -> str:
    """The plugin's ``Call stack`` text: ``file(line): module`` frames joined by ``;``."""
    frames = []
    if source:
        path, _, line = source.rpartition(":")
        frames.append(f"{path}({line}): {module or '<top level>'}" if line.isdigit() and path else source)
    elif module:
        frames.append(module)
    return ";".join(frames)


def _op_events(frame) -> list:
    events = []
    # plain lists and small caches: this loop runs once per call (100,000s)
    columns = {c: frame[c].tolist() for c in ("seq", "step", "phase", "op", "verdict", "fallback_ops", "fallback_calls",
                                              "module", "source", "dtypes", "shapes", "start_ns", "end_ns",
                                              "bytes_moved", "transfer", "thread")}
    dims: dict = {}
    types: dict = {}
    stacks: dict = {}
    marks: dict = {}
    for i in range(len(frame)):
        op, verdict, module, source = columns["op"][i], columns["verdict"][i], columns["module"][i], columns["source"][i]
        shapes, dtypes = columns["shapes"][i], columns["dtypes"][i]
        ts = _us(columns["start_ns"][i])
        dur = round(_us(columns["end_ns"][i]) - ts, 3)
        tid = _tid(columns["thread"][i])
        if shapes not in dims:
            dims[shapes] = _dims(shapes)
        if dtypes not in types:
            types[dtypes] = [d for d in str(dtypes).split(",") if d]
        if (source, module) not in stacks:
            stacks[(source, module)] = _call_stack(source, module)
        moved = int(columns["bytes_moved"][i])
        args = {
            "External id": int(columns["seq"][i]) + 1,
            "Input Dims": dims[shapes],
            "Input type": types[dtypes],
            "Call stack": stacks[(source, module)],
            "dmlprof verdict": verdict,
            "module": module,
            "source": source,
            "phase": columns["phase"][i],
            "step": int(columns["step"][i]),
        }
        if moved:
            args["bytes moved"] = moved
        if columns["transfer"][i]:
            args["transfer"] = columns["transfer"][i]
        if verdict == FALLBACK:
            inner = columns["fallback_ops"][i]
            args["fallback ops"] = inner
            if (op, inner) not in marks:
                marks[(op, inner)] = fallback_range_name(op, inner)
            # the mark first: with equal start and end the plugin keeps file order, so it nests the op
            events.append({"ph": "X", "cat": "cpu_op", "name": marks[(op, inner)], "pid": PID, "tid": tid, "ts": ts,
                           "dur": dur, "cname": FALLBACK_COLOUR,
                           "args": {"dmlprof": "fallback to the CPU", "Call stack": args["Call stack"], "op": op,
                                    "fallback ops": inner, "inner calls": int(columns["fallback_calls"][i]),
                                    "module": module, "source": source, "bytes moved": moved}})
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args})
    return events


def _kernel_events(run: RunMeta, frame) -> list:
    """Each call's measured kernel time as a range on the device kernels' lane (see the module docstring)."""
    timed = frame[frame["device_time_ns"].notna() & (frame["device_time_ns"] > 0)].sort_values("start_ns", kind="stable")
    if timed.empty:
        return []
    device = f"{run.device.backend or 'device'}" + (f" ({run.device.name})" if run.device.name else "")
    events = [{"ph": "M", "name": "process_name", "pid": KERNEL_PID, "tid": 0, "ts": 0, "args": {"name": device}},
              {"ph": "M", "name": "thread_name", "pid": KERNEL_PID, "tid": KERNEL_TID, "ts": 0,
               "args": {"name": KERNEL_LANE}}]
    synced = run.recording.sync is not False
    free_ns = 0  # without a sync after each call, kernels queue: one starts when launched or when the last ends
    for call in timed.itertuples():
        kernel_ns = int(call.device_time_ns)
        start = int(call.end_ns) - kernel_ns if synced else max(int(call.start_ns), free_ns)
        free_ns = start + kernel_ns
        events.append({"ph": "X", "cat": "kernel", "name": call.op, "pid": KERNEL_PID, "tid": KERNEL_TID,
                       "ts": _us(start), "dur": _us(kernel_ns),
                       "args": {"External id": int(call.seq) + 1, "kernel time ns": kernel_ns,
                                "placed": _PLACED[synced]}})
    return events


def _fallback_lane(frame) -> list:
    """Every call that fell back again on a lane of its own (the --trace file): in Perfetto and
    chrome://tracing they are otherwise slices like every other, nested in their thread's calls."""
    fallen = frame[frame["verdict"] == FALLBACK]
    if fallen.empty:
        return []
    events = [{"ph": "M", "name": "process_name", "pid": FALLBACK_PID, "tid": 0, "ts": 0,
               "args": {"name": FALLBACK_LANE}},
              {"ph": "M", "name": "thread_name", "pid": FALLBACK_PID, "tid": FALLBACK_TID, "ts": 0,
               "args": {"name": FALLBACK_LANE}}]
    for call in fallen.sort_values("start_ns", kind="stable").itertuples():
        ts = _us(call.start_ns)
        events.append({"ph": "X", "cat": "fallback", "name": fallback_range_name(call.op, call.fallback_ops),
                       "pid": FALLBACK_PID, "tid": FALLBACK_TID, "ts": ts, "dur": round(_us(call.end_ns) - ts, 3),
                       "cname": FALLBACK_COLOUR,
                       "args": {"External id": int(call.seq) + 1, "op": call.op, "module": call.module,
                                "source": call.source, "bytes moved": int(call.bytes_moved)}})
    return events


_PLACED = {True: "ending with its call (the device was synchronised after each call)",
           False: "queued after the previous call's kernels (kernel start times are not recorded)"}


def trace_json(session) -> str:
    """The session as one Chrome/Perfetto trace file (``scan --trace FILE``), with the device kernels' lane."""
    return json.dumps(trace_dict(session, kernels=True), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _dims(shapes: str) -> list:
    try:
        value = json.loads(shapes) if shapes else []
    except (ValueError, RecursionError):
        return []
    return value if isinstance(value, list) else []


def run_name(session) -> str:
    """``<model>-<backend>-<yyyymmddThhmmss>``: the run's folder name under the log dir."""
    return session.meta.file_stem()


def _timestamp_ms(run: RunMeta) -> int:
    try:
        return int(datetime.fromisoformat(run.started_at or "").timestamp() * 1000)
    except ValueError:
        return int(time.time() * 1000)


def write_tensorboard_run(session, log_dir, run: str | None = None) -> Path:
    """Write the session as a TensorBoard profiler run under ``log_dir``; returns the trace file.

    Layout: ``log_dir/<run>/<worker>.<timestamp>.pt.trace.json`` (what
    ``torch.profiler.tensorboard_trace_handler`` writes). Open it with
    ``dmlprof view log_dir`` (TensorBoard + torch-tb-profiler) or in Perfetto.
    """
    trace = trace_dict(session)
    worker = fit_name(_SAFE.sub("_", f"dmlprof_{session.meta.device.backend or 'device'}"), 48)
    text = json.dumps(trace, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    folder = Path(log_dir) / (run or run_name(session))
    try:
        # a run folder of its own (run-2, run-3 when taken): two scans started in the same second keep one each
        folder = make_new_dir(folder)
    except OSError as exc:
        raise UsageError(f"cannot write the trace under {folder}: {exc.strerror or exc}") from None
    try:
        return write_atomic(folder / f"{worker}.{_timestamp_ms(session.meta)}.pt.trace.json", text)
    except OSError as exc:
        try:
            folder.rmdir()  # no empty run folder left behind for TensorBoard to list
        except OSError:
            pass
        raise UsageError(f"cannot write the trace under {folder}: {exc.strerror or exc}") from None
