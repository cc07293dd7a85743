"""The recorded calls on one time axis: lanes by where they ran, and the steps that hold them.

What the HTML report's timeline draws. Times are nanoseconds from the first
recorded call; a call's lane is where it ran (``device``, ``fallback``, or
``host`` for every other call: calls on CPU tensors inside the step, the
host's own bookkeeping).
"""
from __future__ import annotations

import pandas as pd

from dmlprof.schema import DEVICE, FALLBACK

#: the timeline's lanes, top to bottom; a verdict not named here runs on the host
LANES = ("device", "fallback", "host")
_LANE_OF = {DEVICE: 0, FALLBACK: 1}
_HOST_LANE = 2

TIMELINE_COLUMNS = ["start_ns", "time_ns", "lane", "op", "module", "source", "phase", "step"]
STEP_COLUMNS = ["step", "start_ns", "end_ns", "calls"]


def timeline(ops: pd.DataFrame) -> pd.DataFrame:
    """One row per timed call, in time order: its start (from the first call), duration, lane and names.

    Empty when no call has a time (a prediction, an empty run): there is nothing to lay out.
    """
    if ops.empty or int(ops["time_ns"].sum()) <= 0:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    frame = ops.sort_values(["start_ns", "seq"], kind="stable")
    start = frame["start_ns"].astype("int64")
    return pd.DataFrame({
        "start_ns": (start - int(start.min())).to_numpy(),
        "time_ns": frame["time_ns"].clip(lower=0).astype("int64").to_numpy(),
        "lane": frame["verdict"].map(_LANE_OF).fillna(_HOST_LANE).astype("int64").to_numpy(),
        "op": frame["op"].astype(str).to_numpy(),
        "module": frame["module"].astype(str).to_numpy(),
        "source": frame["source"].astype(str).to_numpy(),
        "phase": frame["phase"].astype(str).to_numpy(),
        "step": frame["step"].astype("int64").to_numpy(),
    }, columns=TIMELINE_COLUMNS)


def step_spans(calls: pd.DataFrame) -> pd.DataFrame:
    """Per step of a :func:`timeline`: where it starts and ends on the axis, and how many calls it holds."""
    if calls.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    spans = (calls.assign(end_ns=calls["start_ns"] + calls["time_ns"])
             .groupby("step", sort=True)
             .agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"), calls=("op", "size"))
             .reset_index())
    return spans[STEP_COLUMNS]
