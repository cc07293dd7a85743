"""Merging the ranks of a distributed run: DataFrames in, DataFrames (or a dict) out.

Inputs are every rank's frames with a ``rank`` column: the op frame
(``phase == "comm"`` for collectives), the collectives table
(``comm_time_ns``: the collective's own duration) and the measured step
times (contract mode; empty for scripts, whose steps are read off the calls).

In data-parallel training every rank waits for the slowest at each
all-reduce, so step times come out nearly equal; the slow rank shows as the
one that is *busy* longest (compute, fallbacks, host calls) while the others
spend that time inside their collectives, waiting.
"""
from __future__ import annotations

import pandas as pd

from dmlprof.schema import COMM, CPU, DEVICE, FALLBACK, HOST

_NS_PER_MS = 1e6
#: a rank is called the straggler when it is busy this much longer than the others (share of its step)
STRAGGLER_MIN_SHARE = 0.10
STRAGGLER_MIN_MS = 0.5
SPLIT_COLUMNS = ["rank", "step", "step_ms", "compute_ms", "fallback_ms", "cpu_ms", "host_ms", "comm_call_ms", "comm_ms",
                 "other_ms", "busy_ms", "comm_calls", "comm_bytes", "fallback_calls"]


def script_step_times(ops: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step) of a script: from the end of one optimizer step to the end of the next.

    Script steps are counted at each ``optimizer.step()``, so their times are
    the iteration periods torch.profiler's ``Optimizer.step#`` ranges show. The
    first recorded step has none: what came before it (the script's set-up, or
    its unrecorded warm-up steps and the Python between them) is not recorded.
    """
    opt = ops[ops["phase"] == "optimizer"]
    if opt.empty:
        return pd.DataFrame(columns=["rank", "step", "step_ms"])
    ends = (opt.assign(end_ns=opt["start_ns"] + opt["time_ns"]).groupby(["rank", "step"])["end_ns"].max().reset_index())
    ends["step_ms"] = ends.groupby("rank")["end_ns"].diff() / _NS_PER_MS
    return ends.dropna(subset=["step_ms"])[["rank", "step", "step_ms"]].reset_index(drop=True)


def step_split(ops: pd.DataFrame, collectives: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step): where the step's time went.

    ``compute_ms`` device calls, ``fallback_ms`` calls the backend sent to the
    CPU, ``cpu_ms`` calls on CPU tensors (host work inside an accelerator
    step: findings, as the single-run report's ``cpu``), ``host_ms`` the host's
    bookkeeping (verdict ``host``: calls on CPU scalars only, not findings, but
    time the rank is busy), ``comm_call_ms`` the collectives' calls themselves
    (handing work to the process group), ``comm_ms`` the collectives' own
    duration (they run beside compute, and include waiting for the other
    ranks), ``other_ms`` the rest of the step (Python, waiting for a collective
    to finish). ``busy_ms`` = compute + fallback + cpu + host + comm calls. ``steps`` holds the
    measured step times (model files); without them steps are read off the
    calls (:func:`script_step_times`).
    """
    if ops.empty:
        return pd.DataFrame(columns=SPLIT_COLUMNS)
    if steps is None or steps.empty:
        steps = script_step_times(ops)
    comm = ops["phase"] == COMM
    per = lambda mask: ops[mask].groupby(["rank", "step"])["time_ns"].sum() / _NS_PER_MS  # noqa: E731
    frame = pd.DataFrame({
        "compute_ms": per(~comm & (ops["verdict"] == DEVICE)),
        "fallback_ms": per(~comm & (ops["verdict"] == FALLBACK)),
        "cpu_ms": per(~comm & (ops["verdict"] == CPU)),
        "host_ms": per(~comm & (ops["verdict"] == HOST)),
        "comm_call_ms": per(comm),
        "fallback_calls": ops[ops["verdict"] == FALLBACK].groupby(["rank", "step"]).size(),
    })
    if collectives is not None and len(collectives):
        grouped = collectives.assign(comm_ns=pd.to_numeric(collectives["comm_time_ns"], errors="coerce"),
                                     payload=pd.to_numeric(collectives["bytes"], errors="coerce")).groupby(["rank", "step"])
        frame["comm_ms"] = grouped["comm_ns"].sum(min_count=1) / _NS_PER_MS
        frame["comm_calls"] = grouped.size()
        frame["comm_bytes"] = grouped["payload"].sum()
    frame = frame.reindex(columns=[c for c in SPLIT_COLUMNS if c not in ("rank", "step", "step_ms", "other_ms", "busy_ms")])
    frame = frame.reset_index().rename(columns={"level_0": "rank", "level_1": "step"})
    for column in ("compute_ms", "fallback_ms", "cpu_ms", "host_ms", "comm_call_ms", "fallback_calls", "comm_calls",
                   "comm_bytes"):
        frame[column] = frame[column].fillna(0)
    frame = frame.merge(steps[["rank", "step", "step_ms"]], on=["rank", "step"], how="inner")
    frame["busy_ms"] = (frame["compute_ms"] + frame["fallback_ms"] + frame["cpu_ms"] + frame["host_ms"]
                        + frame["comm_call_ms"])
    frame["other_ms"] = (frame["step_ms"] - frame["busy_ms"]).clip(lower=0)
    return frame[SPLIT_COLUMNS].sort_values(["rank", "step"]).reset_index(drop=True)


def rank_summary(split: pd.DataFrame) -> pd.DataFrame:
    """Per rank: the median step and the median of each part of it (and shares of the median step)."""
    columns = ["rank", "steps"] + SPLIT_COLUMNS[2:] + ["comm_share", "fallback_share"]
    if split.empty:
        return pd.DataFrame(columns=columns)
    medians = split.groupby("rank")[SPLIT_COLUMNS[2:]].median()
    medians["steps"] = split.groupby("rank").size()
    medians["comm_share"] = (medians["comm_ms"] / medians["step_ms"]).where(medians["step_ms"] > 0)
    medians["fallback_share"] = (medians["fallback_ms"] / medians["step_ms"]).where(medians["step_ms"] > 0)
    return medians.reset_index()[columns]


def straggler(summary: pd.DataFrame, ops: pd.DataFrame, top: int = 5) -> dict:
    """The rank the others wait for, how much longer it is busy, and why (its fallbacks, host calls, ops).

    ``rank`` is None when no rank is busy at least ``STRAGGLER_MIN_SHARE`` of its
    step (and ``STRAGGLER_MIN_MS``) longer than the median of the others.
    """
    result = {"rank": None, "busy_excess_ms": 0.0, "fallback_excess_ms": 0.0, "cpu_excess_ms": 0.0,
              "compute_excess_ms": 0.0, "others_comm_excess_ms": 0.0, "threshold_ms": None, "ops": []}
    if len(summary) < 2:
        return result
    slowest = summary.sort_values("busy_ms", ascending=False, kind="stable").iloc[0]
    others = summary[summary["rank"] != slowest["rank"]]
    excess = float(slowest["busy_ms"] - others["busy_ms"].median())
    threshold = max(STRAGGLER_MIN_SHARE * float(slowest["step_ms"]), STRAGGLER_MIN_MS)
    result.update(busy_excess_ms=excess, threshold_ms=threshold)
    if excess < threshold:
        return result
    rank = int(slowest["rank"])
    result.update(
        rank=rank,
        fallback_excess_ms=float(slowest["fallback_ms"] - others["fallback_ms"].median()),
        cpu_excess_ms=float(slowest["cpu_ms"] - others["cpu_ms"].median()),
        compute_excess_ms=float(slowest["compute_ms"] - others["compute_ms"].median()),
        others_comm_excess_ms=float(others["comm_ms"].median() - slowest["comm_ms"]),
        ops=op_excess(ops, rank).head(top).to_dict(orient="records"),
    )
    return result


def op_excess(ops: pd.DataFrame, rank: int) -> pd.DataFrame:
    """Per op and verdict: time per step on ``rank`` minus the mean over the other ranks, largest first."""
    columns = ["op", "verdict", "rank_ms_per_step", "others_ms_per_step", "excess_ms_per_step"]
    work = ops[ops["phase"] != COMM]
    if work.empty:
        return pd.DataFrame(columns=columns)
    steps = work.groupby("rank")["step"].nunique()
    per_step = work.groupby(["rank", "op", "verdict"])["time_ns"].sum().unstack("rank", fill_value=0) / _NS_PER_MS
    per_step = per_step / steps.reindex(per_step.columns).to_numpy()
    mine = per_step[rank] if rank in per_step else 0.0
    others = per_step.drop(columns=[rank], errors="ignore")
    frame = pd.DataFrame({"rank_ms_per_step": mine, "others_ms_per_step": others.mean(axis=1) if others.shape[1] else 0.0})
    frame["excess_ms_per_step"] = frame["rank_ms_per_step"] - frame["others_ms_per_step"]
    frame = frame[frame["excess_ms_per_step"] > 0].sort_values("excess_ms_per_step", ascending=False, kind="stable")
    return frame.reset_index()[columns]


def verdict_differences(ops: pd.DataFrame) -> pd.DataFrame:
    """Ops whose verdicts (calls per step by verdict) are not the same on every rank.

    One row per op: ``by_rank`` maps each rank to ``{verdict: calls per step}``
    (an empty dict where the rank never called the op).
    """
    columns = ["op", "by_rank"]
    if ops.empty or ops["rank"].nunique() < 2:
        return pd.DataFrame(columns=columns)
    work = ops[ops["phase"] != COMM]
    steps = work.groupby("rank")["step"].nunique()
    counts = work.groupby(["op", "rank", "verdict"]).size().reset_index(name="calls")
    counts["per_step"] = (counts["calls"] / counts["rank"].map(steps)).round(2)
    ranks = sorted(ops["rank"].unique())
    rows = []
    for op, group in counts.groupby("op", sort=True):
        by_rank = {int(r): {} for r in ranks}
        for r, verdict, value in zip(group["rank"], group["verdict"], group["per_step"]):
            by_rank[int(r)][str(verdict)] = float(value)
        if len({tuple(sorted(v.items())) for v in by_rank.values()}) > 1:
            rows.append((op, by_rank))
    return pd.DataFrame(rows, columns=columns)


def collective_summary(collectives: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, collective, op): calls, bytes, time in the call, the collective's own time."""
    columns = ["rank", "collective", "op", "calls", "bytes", "call_time_ms", "comm_time_ms"]
    if collectives is None or collectives.empty:
        return pd.DataFrame(columns=columns)
    work = collectives.assign(comm_ns=pd.to_numeric(collectives["comm_time_ns"], errors="coerce"),
                              payload=pd.to_numeric(collectives["bytes"], errors="coerce"),
                              call_ns=pd.to_numeric(collectives["call_time_ns"], errors="coerce"))
    grouped = work.groupby(["rank", "collective", "op"]).agg(
        calls=("seq", "size"), bytes=("payload", "sum"), call_ns=("call_ns", "sum"),
        comm_ns=("comm_ns", lambda s: s.sum(min_count=1))).reset_index()
    grouped["call_time_ms"] = grouped["call_ns"] / _NS_PER_MS
    grouped["comm_time_ms"] = grouped["comm_ns"] / _NS_PER_MS
    return grouped.sort_values(["rank", "comm_ns"], ascending=[True, False], kind="stable")[columns].reset_index(drop=True)
