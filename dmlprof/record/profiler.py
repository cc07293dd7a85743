"""torch.profiler alongside the recorder, converted to our own frames at once.

We never hand torch's EventList to the rest of dmlprof: the events become a
small per-op frame (for cross-checking our times) and per-call device times
joined onto our op rows.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import warnings
from collections import defaultdict
from contextlib import contextmanager
from typing import Callable, Optional

import pandas as pd

from dmlprof.schema import format_ranges

# Kineto prints these on start/stop (torch 2.13: "USDT: ... profiler_start"), and a CUDA build
# without a GPU on exporting a trace (torch 2.4.1: "DeviceProperties.cpp:46] gpuGetDeviceCount failed").
_PROFILER_NOISE = re.compile(r"USDT|STAGE:|kineto|Kineto|ActivityProfiler|CUPTI|libkineto|Profiler|DeviceProperties\.cpp")


@contextmanager
def quiet_native_stderr():
    """Keep the profiler's start/stop chatter out of the report.

    Kineto prints on fd 2 from C++, and torch.profiler warns from Python; both
    are held meanwhile, and what is not profiler noise is passed on.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            yield
            return
        with tempfile.TemporaryFile(mode="w+b") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                try:
                    sys.stderr.flush()
                except Exception:
                    pass
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                dropping = False
                for line in _held_lines(sink.read().decode("utf-8", "replace")):
                    # an indented line continues the message before it (a warning's source line)
                    if line[:1].isspace() and dropping:
                        continue
                    dropping = bool(_PROFILER_NOISE.search(line)) or not line.strip()
                    if not dropping:
                        print(line, file=sys.stderr)
    for warning in caught:
        if not _PROFILER_NOISE.search(str(warning.message)) and warning.category is not DeprecationWarning:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def _held_lines(text: str) -> list:
    """What fd 2 received while held, as the lines a terminal would have shown: a line redrawn in place
    (``\r``) shows what came after its last carriage return, and a last line that ends unfinished after one
    is dmlprof's progress bar, redrawn meanwhile by its clock thread: no message (passed on, it stayed on
    screen, printed twice). Windows ends lines with ``\r\n``."""
    lines = text.replace("\r\n", "\n").split("\n")
    if "\r" in lines[-1]:
        lines[-1] = ""
    return [line.rsplit("\r", 1)[-1] for line in lines]


_EVENT_COLUMNS = ["name", "start_ns", "time_ns", "device_time_ns", "self_device_time_ns", "parent", "grandparent", "thread",
                  "ranges", "parent_row"]
# torch >= 2.5 wraps the Python dispatch mode's work in a range of its own.
MODE_RANGE = "PythonDispatchMode"
#: Kineto's scope of a ``torch.profiler.record_function`` range (RecordScope::USER_SCOPE, torch 2.4 to today)
USER_SCOPE = 7
#: ranges dmlprof opens itself (its steps): never shown as the user's
OWN_RANGE_PREFIX = "dmlprof::"
#: ranges torch opens itself (around every optimizer step, DataLoader batch, DDP forward, compiled region):
#: not the scanned code's own
TORCH_RANGE_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#", "enumerate(DataLoader)#", "DistributedDataParallel.",
                        "Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")
#: an empty range the recorder opens where it forgets what it recorded (a script's warm-up steps): the
#: profiler saw those calls, so only the calls after the last such mark are the recorded rows'
ROWS_DROPPED_MARK = OWN_RANGE_PREFIX + "rows_dropped"


def mark_rows_dropped() -> None:
    """Leave :data:`ROWS_DROPPED_MARK` in the profiler's trace, if one runs."""
    import torch.profiler

    with torch.profiler.record_function(ROWS_DROPPED_MARK):
        pass


#: torch.profiler runs alongside at most this many recorded calls. It costs about 35 KB a call (Kineto's own
#: trace, built when it stops), so a script that never steps (an eval loop, a data pipeline) would pile up GBs:
#: past the cap it stops, and the cross-check covers the calls it saw (benchmarks/results/recording_bound.json)
PROFILED_CALLS_MAX = 20_000


class ProfilerAlongside:
    """Runs torch.profiler (CPU, plus the device where it has kernel times).

    It may stop before the recording does (:meth:`stop_early`): at :data:`PROFILED_CALLS_MAX` calls, or when
    the scanned code starts a torch.profiler of its own (Kineto runs one at a time: the user's wins, and runs
    as it would without dmlprof). ``covered_calls`` then says how many of the recorded calls it saw.
    """

    def __init__(self, backend, enabled: bool = True):
        self.backend = backend
        self.enabled = enabled
        self._prof = None
        self._stopped = False
        #: why it stopped before the recording did, and the recorded calls it had seen then (None: all)
        self.stopped_early: Optional[str] = None
        self.covered_calls: Optional[int] = None
        #: its results were lost: the memory ran out while it stopped
        self.lost = False
        #: how many calls have been recorded so far (the runner's recorder sets it)
        self.calls_so_far: Callable[[], int] = lambda: 0
        self._yielding = None
        self._owner = None

    def __enter__(self):
        if not self.enabled:
            return self
        import torch.profiler

        self._prof = torch.profiler.profile(
            activities=self.backend.profiler_activities(),
            record_shapes=True,
            with_stack=False,  # crashes silently on DirectML; we attribute lines ourselves
        )
        with quiet_native_stderr():
            self._prof.__enter__()
        self._owner = threading.get_ident()
        self._yielding = _yield_to_the_users_profiler(self)
        self._yielding.__enter__()
        return self

    def __exit__(self, *exc):
        if self._prof is None or self._stopped or not self._on_owner():
            # idempotent, like Recorder.__exit__; and only where it started (torch 2.4 loses the results of a
            # profiler stopped on another thread: a training thread's window end); the owner stops it later
            return False
        self._stopped = True
        self._yielding.__exit__(None, None, None)
        try:
            with quiet_native_stderr():
                self._prof.__exit__(*exc)
        except MemoryError:  # building its results ran out of memory: the recording is saved without them
            self._prof, self.lost = None, True
        return False

    def _on_owner(self) -> bool:
        return threading.get_ident() == self._owner

    def stop_early(self, reason: str) -> bool:
        """Stop now, though the recording goes on; the session says ``reason`` and what the profiler saw.
        False when it cannot stop from this thread (an autograd or training thread): ask again later."""
        if self._prof is None or self._stopped:
            return True
        if not self._on_owner():
            return False
        self.stopped_early, self.covered_calls = reason, self.calls_so_far()
        self.__exit__(None, None, None)
        return True

    def note(self) -> Optional[str]:
        """What the session says when the profiler stopped early (None when it saw every call)."""
        if self.lost:
            return ("torch.profiler's results were lost (the memory ran out as it stopped): the session holds the "
                    "recorded calls without its cross-check and kernel times")
        if self.stopped_early is None:
            return None
        return (f"torch.profiler ran alongside the first {self.covered_calls:,} recorded calls only "
                f"({self.stopped_early}); its cross-check and kernel times cover those")

    @property
    def profile(self):
        return self._prof

    def op_events(self) -> pd.DataFrame:
        """One row per host-side profiler event: name, start, duration, nesting, kernel time."""
        results = getattr(getattr(self._prof, "profiler", None), "kineto_results", None)
        if results is None:  # not run, or its results were lost
            return pd.DataFrame(columns=_EVENT_COLUMNS)
        return kineto_event_frame(results.events())


@contextmanager
def _yield_to_the_users_profiler(alongside: ProfilerAlongside):
    """While ``alongside`` runs, a torch.profiler the scanned code starts first stops ours: Kineto runs one
    profiler at a time, and a second one started over the first saw nothing, failed on exit ("Can't disable
    Kineto profiler when it's not running") or crashed the process when the step window stopped ours."""
    import torch.autograd.profiler as autograd_profiler

    names = ("_prepare_profiler", "_enable_profiler")
    real = {name: getattr(autograd_profiler, name) for name in names}

    def wrap(name):
        def starting(*args, **kwargs):
            alongside.stop_early("the scanned code started torch.profiler itself")
            return real[name](*args, **kwargs)
        return starting

    for name in names:
        setattr(autograd_profiler, name, wrap(name))
    try:
        yield
    finally:
        for name in names:
            setattr(autograd_profiler, name, real[name])


def kineto_event_frame(raw_events) -> pd.DataFrame:
    """Host events with their nesting and the device time of the kernels each launched.

    Read from Kineto's own events rather than torch's FunctionEvent tree
    (faster, and on torch 2.11 that tree leaves most kernels unattached).
    Nesting is by time containment per thread; a kernel is billed to the host
    op that launched it (its linked correlation id) and, through the nesting,
    to every op that encloses that one.
    """
    from torch.autograd import DeviceType

    host, kernel_ns = [], defaultdict(int)
    for event in raw_events:
        start = _start_ns(event)
        duration = int(event.duration_ns())
        if event.device_type() == DeviceType.CPU:
            host.append((event.name(), start, duration, int(event.start_thread_id()), int(event.correlation_id()),
                         _is_user_range(event)))
        else:
            linked = int(event.linked_correlation_id())
            if linked > 0:
                kernel_ns[linked] += duration
    host.sort(key=lambda e: (e[3], e[1], -e[2]))
    count = len(host)
    parent_of = [-1] * count
    # the user's record_function ranges around each event, outermost first: (name, start_ns) each
    ranges_of: list = [()] * count
    stack: list = []
    for index, (_, start, duration, thread, _, _) in enumerate(host):
        while stack and (host[stack[-1]][3] != thread or host[stack[-1]][1] + host[stack[-1]][2] < start + duration):
            stack.pop()
        parent = stack[-1] if stack else -1
        parent_of[index] = parent
        if parent >= 0:
            around = host[parent]
            ranges_of[index] = ranges_of[parent] + ((around[0], around[1]),) if around[5] else ranges_of[parent]
        stack.append(index)
    self_device = [kernel_ns.get(e[4], 0) if e[4] > 0 else 0 for e in host]
    total_device = list(self_device)
    for index in range(count - 1, -1, -1):  # children come after their parents
        if parent_of[index] >= 0:
            total_device[parent_of[index]] += total_device[index]
    names = [e[0] for e in host]
    parents = [names[p] if p >= 0 else "" for p in parent_of]
    grandparents = [parents[p] if p >= 0 else "" for p in parent_of]
    return pd.DataFrame(
        {
            "name": names,
            "start_ns": [e[1] for e in host],
            "time_ns": [e[2] for e in host],
            "device_time_ns": total_device,
            "self_device_time_ns": self_device,
            "parent": parents,
            "grandparent": grandparents,
            "thread": [e[3] for e in host],
            "ranges": ranges_of,
            "parent_row": parent_of,  # the enclosing event's row (-1: none); rows are in this order
        },
        columns=_EVENT_COLUMNS,
    )


def _is_user_range(event) -> bool:
    """A ``record_function`` range of the scanned code (not one of dmlprof's or torch's own)."""
    try:
        scope = int(event.scope())
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return False
    return scope == USER_SCOPE and not event.name().startswith((OWN_RANGE_PREFIX,) + TORCH_RANGE_PREFIXES)


def _start_ns(event) -> int:
    start = getattr(event, "start_ns", None)
    return int(start()) if start is not None else int(event.start_us() * 1000)


def _first_attr(event, names) -> float:
    """The first of ``names`` the event has (torch renamed cuda_* to device_* in 2.4-2.5)."""
    for name in names:
        try:
            value = getattr(event, name)
        except (AttributeError, RuntimeError):
            continue
        if value is not None:
            return float(value)
    return 0.0


def recorded_call_events(events: pd.DataFrame) -> pd.DataFrame:
    """The profiler events that are our recorded calls, in the order they ran.

    Every call the recorder sees shows in the profiler twice, nested: the outer event includes our
    bookkeeping, the inner one (whose parent, or grandparent through a ``PythonDispatchMode`` range, has
    the same name) is the call we timed. A call made inside another one (``mean`` dividing in place) is
    seen too, but is not a recorded row: only the outermost count. Calls the recorder forgot (a script's
    warm-up steps) come before the last :data:`ROWS_DROPPED_MARK` and are left out.
    """
    if events.empty:
        return events
    inner = inner_call_mask(events).tolist()
    # (a frame built by hand, without nesting rows, is taken as flat)
    parents = events["parent_row"].tolist() if "parent_row" in events else [-1] * len(inner)
    inside_call = [False] * len(inner)
    for row, parent in enumerate(parents):  # a parent's row comes before its children's
        if parent >= 0:
            inside_call[row] = inside_call[parent] or inner[parent]
    outermost = [flag and not nested for flag, nested in zip(inner, inside_call)]
    calls = events[outermost]
    marks = events.loc[events["name"] == ROWS_DROPPED_MARK, "start_ns"]
    if len(marks):
        calls = calls[calls["start_ns"] > marks.max()]
    return calls.sort_values("start_ns", kind="stable")


def inner_call_mask(events: pd.DataFrame) -> pd.Series:
    """Which events are the inner half of a call our dispatch mode recorded.

    torch >= 2.5 puts a ``PythonDispatchMode`` range between the two halves;
    where the trace has such ranges, only that shape counts (an op calling a
    same-named overload inside itself is not a recorded call).
    """
    through_mode = (events["parent"] == MODE_RANGE) & (events["name"] == events["grandparent"])
    if (events["name"] == MODE_RANGE).any():
        return through_mode
    return events["name"] == events["parent"]


def profiler_op_totals(events: pd.DataFrame) -> pd.DataFrame:
    """Per op (profiler spelling, e.g. ``aten::addmm``): calls and total times."""
    calls = recorded_call_events(events)
    if calls.empty:
        return pd.DataFrame(columns=["op", "calls", "time_ns", "device_time_ns"])
    grouped = calls.groupby("name").agg(calls=("time_ns", "size"), time_ns=("time_ns", "sum"), device_time_ns=("device_time_ns", "sum"))
    return grouped.reset_index().rename(columns={"name": "op"})


def join_call_events(ops: pd.DataFrame, events: pd.DataFrame, device_times: bool) -> pd.DataFrame:
    """Give each op row what its own profiler event knows: the ``record_function`` ranges around it, and
    with ``device_times`` the device (kernel) time it launched.

    Rows and inner events are matched per op name in execution order: the k-th
    recorded ``aten::mm`` is the k-th inner ``aten::mm`` event.
    """
    calls = recorded_call_events(events)
    if calls.empty or ops.empty:
        return ops
    queues = defaultdict(list)
    for position, name in enumerate(calls["name"]):
        queues[name].append(position)
    taken = defaultdict(int)
    matched = []
    for op in ops["op"]:
        name = op.split(".", 1)[0]
        queue = queues.get(name)
        index = taken[name]
        if queue is not None and index < len(queue):
            matched.append(queue[index])
            taken[name] = index + 1
        else:
            matched.append(None)
    ops = ops.copy()
    ranges = calls["ranges"].tolist()
    ops["ranges"] = numbered_ranges([ranges[m] if m is not None else () for m in matched])
    if device_times:
        device_ns = calls["device_time_ns"].tolist()
        ops["device_time_ns"] = pd.array([device_ns[m] if m is not None else None for m in matched], dtype="Float64")
    return ops


def numbered_ranges(ranges_per_call: list) -> list:
    """Each call's ranges (``(name, start_ns)`` pairs from :func:`kineto_event_frame`) as the op frame's text:
    a range is known by its name and its occurrence in the run (``["forward", 2]``: the second ``forward``)."""
    starts: dict = defaultdict(set)
    for ranges in ranges_per_call:
        for name, start in ranges:
            starts[name].add(start)
    occurrence = {(name, start): number for name, seen in starts.items()
                  for number, start in enumerate(sorted(seen), start=1)}
    return [format_ranges([(name, occurrence[(name, start)]) for name, start in ranges]) if ranges else ""
            for ranges in ranges_per_call]
