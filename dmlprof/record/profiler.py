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
                for line in sink.read().decode("utf-8", "replace").splitlines():
                    # an indented line continues the message before it (a warning's source line)
                    if line[:1].isspace() and dropping:
                        continue
                    dropping = bool(_PROFILER_NOISE.search(line)) or not line.strip()
                    if not dropping:
                        print(line, file=sys.stderr)
    for warning in caught:
        if not _PROFILER_NOISE.search(str(warning.message)) and warning.category is not DeprecationWarning:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


_EVENT_COLUMNS = ["name", "start_ns", "time_ns", "device_time_ns", "self_device_time_ns", "parent", "grandparent", "thread"]
# torch >= 2.5 wraps the Python dispatch mode's work in a range of its own.
MODE_RANGE = "PythonDispatchMode"


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
        with quiet_native_stderr():
            self._prof.__exit__(*exc)
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
            host.append((event.name(), start, duration, int(event.start_thread_id()), int(event.correlation_id())))
        else:
            linked = int(event.linked_correlation_id())
            if linked > 0:
                kernel_ns[linked] += duration
    host.sort(key=lambda e: (e[3], e[1], -e[2]))
    count = len(host)
    parent_of = [-1] * count
    stack: list = []
    for index, (_, start, duration, thread, _) in enumerate(host):
        while stack and (host[stack[-1]][3] != thread or host[stack[-1]][1] + host[stack[-1]][2] < start + duration):
            stack.pop()
        parent_of[index] = stack[-1] if stack else -1
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
        },
        columns=_EVENT_COLUMNS,
    )


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
    """The profiler events that are our recorded calls.

    With our dispatch mode active, every call it records shows in the profiler
    twice, nested: the outer event includes our Python bookkeeping, the inner
    one (whose parent, or grandparent through a ``PythonDispatchMode`` range,
    has the same name) is the call we timed.
    """
    if events.empty:
        return events
    return events[inner_call_mask(events)].sort_values("start_ns", kind="stable")


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


def join_device_times(ops: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Give each op row the device (kernel) time of its own profiler event.

    Rows and inner events are matched per op name in execution order: the k-th
    recorded ``aten::mm`` is the k-th inner ``aten::mm`` event.
    """
    calls = recorded_call_events(events)
    if calls.empty or ops.empty:
        return ops
    queues = defaultdict(list)
    for name, device_ns in zip(calls["name"], calls["device_time_ns"]):
        queues[name].append(device_ns)
    positions = defaultdict(int)
    device_times = []
    for op in ops["op"]:
        name = op.split(".", 1)[0]
        queue = queues.get(name)
        index = positions[name]
        if queue is not None and index < len(queue):
            device_times.append(queue[index])
            positions[name] = index + 1
        else:
            device_times.append(None)
    ops = ops.copy()
    ops["device_time_ns"] = pd.array(device_times, dtype="Float64")
    return ops
