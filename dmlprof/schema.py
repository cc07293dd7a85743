"""The op frame's schema: one row per op call, its columns, verdicts and phases.

The bottom of the house: the recorder writes this frame (its verdicts made
final in :func:`typed_ops_frame`), the Session saves it, analysis reads it,
the report and the HTML page's script name its values.
Everything that compares a verdict or a phase uses these names, never a
string literal of its own. No torch here (renderers and the CLI import it).
"""
from __future__ import annotations

import json
import re
from collections import Counter

import pandas as pd

# Every PyTorch backend with a boxed CPU fallback (torch-directml, MPS, Ascend
# NPU and our emulated DirectML device) words its warning the same way; only
# the backend name differs.
FALLBACK_WARNING = re.compile(
    r"The operator '(?P<op>[^']+)' is not currently supported on the (?P<backend>\S+) backend"
    r" and will fall back to run on the CPU"
)

# The op frame's columns, in order (documented in docs/report_schema.md).
OP_COLUMNS = (
    "seq", "step", "phase", "op", "verdict", "evidence", "fallback_ops", "fallback_calls",
    "module", "source", "input_devices", "output_devices", "dtypes", "shapes",
    "start_ns", "time_ns", "device_time_ns", "bytes_moved", "transfer", "thread", "ranges",
    # the scalar arguments (JSON) of the few ops a wrong-result class is keyed by (dmlprof.directml.call_arguments)
    "arguments",
)

# Verdicts: where a call ran (docs/report_schema.md, "Verdicts").
DEVICE = "device"      #: the device's own kernel (or the CPU, when the CPU is the device)
FALLBACK = "fallback"  #: the backend sent it to the CPU: copy in, CPU kernel, copy out
CPU = "cpu"            #: an accelerator run, but the call's tensors were already on the CPU
#: A call on CPU tensors whose every input is a 0-dim tensor (a scalar): the host keeping its books (an
#: optimizer's step counters). It moves no data and no work off the device, so it is not a finding. The
#: recorder sees such a call as ``cpu``; :func:`typed_ops_frame` makes it ``host``, for every producer of
#: an op frame and every session file loaded (sessions of format 1 hold ``cpu`` there).
HOST = "host"
VERDICTS = (DEVICE, FALLBACK, CPU, HOST)
#: the ``evidence`` of a call sent to the device that the device refused (DirectML raised, or would end the process,
#: and the code caught it): its verdict says where it was sent, but it never ran there, so it is no device call
REFUSED = "refused"
REPORT_VERDICTS = VERDICTS  #: the same four: what the op frame holds is what the report counts

# Phases of a training step, in the order a step runs them (comm: a distributed run's collectives).
FORWARD, BACKWARD, OPTIMIZER, COMM, OTHER = "forward", "backward", "optimizer", "comm", "other"
PHASES = (FORWARD, BACKWARD, OPTIMIZER, COMM, OTHER)

# Calls that make the host wait for the device: a value read back (.item()),
# or an output whose size depends on the data (nonzero, masked_select, unique).
SYNC_OPS = frozenset({
    "aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal", "aten::nonzero",
    "aten::masked_select", "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
})

# The ``shapes`` of a call whose inputs are all 0-dim tensors: ``[[]]``, ``[[], []]``... (a foreach over step counters)
_SCALARS_ONLY = r"\[\[\](?:, \[\])*\]"

_INT_COLUMNS = ("seq", "step", "fallback_calls", "start_ns", "time_ns", "bytes_moved", "thread")
_STR_COLUMNS = tuple(c for c in OP_COLUMNS if c not in _INT_COLUMNS + ("device_time_ns",))


def format_fallback_ops(names) -> str:
    """``aten::a=2;aten::b=1`` from the inner op names, in first-seen order."""
    counts = Counter(names)
    return ";".join(f"{name}={count}" for name, count in counts.items())


def parse_fallback_ops(text: str) -> dict:
    """Inverse of :func:`format_fallback_ops`: inner op name -> calls."""
    found: dict = {}
    for part in filter(None, (text or "").split(";")):
        name, _, count = part.rpartition("=")
        found[name] = found.get(name, 0) + int(count)
    return found


#: a range's name is kept to this many characters, and a call's ranges to the outermost this many: a session
#: file's strings are bounded (dmlprof.session_check), and a name built in a loop may be any length
RANGE_NAME_CHARS, RANGE_DEPTH = 200, 16


def format_ranges(ranges) -> str:
    """The ``ranges`` column: the scanned code's ``record_function`` ranges around a call, outermost first,
    each ``[name, occurrence]`` (the second ``"forward"`` range of the run is ``["forward", 2]``); JSON,
    since a range's name may hold any character."""
    kept = [[str(name)[:RANGE_NAME_CHARS], int(number)] for name, number in list(ranges)[:RANGE_DEPTH]]
    return json.dumps(kept, ensure_ascii=False) if kept else ""


def parse_ranges(text: str) -> list:
    """Inverse of :func:`format_ranges`: ``[(name, occurrence), ...]``; [] for none or a damaged value."""
    try:
        value = json.loads(text) if text else []
    except (ValueError, RecursionError):
        return []
    if not isinstance(value, list):
        return []
    return [(item[0], int(item[1])) for item in value
            if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], int)]


def empty_ops_frame() -> pd.DataFrame:
    """An op frame with no calls (every column, typed)."""
    return typed_ops_frame(pd.DataFrame({column: [] for column in OP_COLUMNS}, columns=list(OP_COLUMNS)))


def typed_ops_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The op frame as every reader sees it: columns typed, missing ones added empty, verdicts final.

    Every producer of an op frame ends here (the recorder's :func:`dmlprof.record.frame.rows_to_frame`,
    :meth:`dmlprof.session.Session.from_dict` for a file, the tests' sessions), so the verdict is judged
    in this one place and every reader (the report, a sweep's fallback share, the distributed merge,
    the trace) reads the same column. A session file saved before ``host`` was a verdict of the frame
    (format 1) upgrades here as it loads.
    """
    for column in OP_COLUMNS:
        if column not in frame:
            frame[column] = None
    frame = frame[list(OP_COLUMNS)].copy()
    for column in _INT_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").fillna(0).astype("int64")
    frame["device_time_ns"] = pd.to_numeric(frame["device_time_ns"], errors="coerce").astype("Float64")
    for column in _STR_COLUMNS:
        frame[column] = frame[column].fillna("").astype(str)
    _judge_host_bookkeeping(frame)
    return frame


def _judge_host_bookkeeping(frame: pd.DataFrame) -> None:
    """``cpu`` calls on 0-dim CPU tensors only become ``host``, in place (:data:`HOST`).

    An optimizer's step counters are the everyday case (Adam's ``state_steps``:
    ``_foreach_add_`` on them, ``_local_scalar_dense`` reading each, ``lift_fresh``
    making them): scalars the host keeps on purpose. A call with any tensor of one
    element or more on the CPU stays ``cpu``; so does one with no tensor input. Only
    the ``cpu`` rows are matched (a few, against a frame of millions of calls).
    """
    marked = (frame["verdict"] == CPU).to_numpy(dtype=bool, copy=True)
    if not marked.any():
        return
    shapes = pd.Series(frame["shapes"].to_numpy()[marked], dtype=object)
    marked[marked] = shapes.str.fullmatch(_SCALARS_ONLY).to_numpy(dtype=bool)
    frame.loc[marked, "verdict"] = HOST
