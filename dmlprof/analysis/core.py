"""Headline numbers, per-op and per-phase tables, fallback hotspots."""
from __future__ import annotations

import pandas as pd

from dmlprof.record.frame import parse_fallback_ops

_NS_PER_MS = 1e6


def _share(part, whole) -> float:
    return float(part) / float(whole) if whole else 0.0


def summary(ops: pd.DataFrame) -> dict:
    """Headline numbers for a run (the JSON report's ``summary``)."""
    verdict = ops["verdict"]
    time_ns = ops["time_ns"]
    total_ns = int(time_ns.sum())
    fallback_ns = int(time_ns[verdict == "fallback"].sum())
    device_ns = int(time_ns[verdict == "device"].sum())
    calls = len(ops)
    device_time = ops["device_time_ns"].dropna() if "device_time_ns" in ops else pd.Series(dtype=float)
    return {
        "op_calls": calls,
        "device_calls": int((verdict == "device").sum()),
        "fallback_calls": int((verdict == "fallback").sum()),
        "cpu_calls": int((verdict == "cpu").sum()),
        "inner_fallback_calls": int(ops["fallback_calls"].sum()),
        "device_call_share": _share((verdict == "device").sum(), calls),
        "time_ms": total_ns / _NS_PER_MS,
        "device_time_ms_on_device": float(device_time.sum()) / _NS_PER_MS if len(device_time) else None,
        "device_op_time_ms": device_ns / _NS_PER_MS,
        "device_time_share": _share(device_ns, total_ns),
        "fallback_time_ms": fallback_ns / _NS_PER_MS,
        "fallback_time_share": _share(fallback_ns, total_ns),
        "cpu_time_ms": int(time_ns[verdict == "cpu"].sum()) / _NS_PER_MS,
        "bytes_moved": int(ops["bytes_moved"].sum()),
        "distinct_ops": int(ops["op"].nunique()),
        "distinct_fallback_ops": len(fallback_op_set(ops)),
    }


def fallback_op_set(ops: pd.DataFrame) -> set:
    """The ops the backend sent to the CPU (the inner ones, for composites)."""
    found: set = set()
    for text in ops.loc[ops["verdict"] == "fallback", "fallback_ops"]:
        found.update(parse_fallback_ops(text))
    return found


def op_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per (op, verdict, phase): calls, time, share of all time; slowest first."""
    columns = ["op", "verdict", "phase", "calls", "time_ms", "device_time_ms", "share", "bytes_moved", "fallback_ops"]
    if ops.empty:
        return pd.DataFrame(columns=columns)
    total = ops["time_ns"].sum()
    grouped = (
        ops.groupby(["op", "verdict", "phase"], sort=False)
        .agg(calls=("seq", "size"), time_ns=("time_ns", "sum"), bytes_moved=("bytes_moved", "sum"),
             device_time_ns=("device_time_ns", _sum_or_none),
             fallback_ops=("fallback_ops", _join_unique_inner))
        .reset_index()
    )
    grouped["time_ms"] = grouped["time_ns"] / _NS_PER_MS
    grouped["device_time_ms"] = pd.to_numeric(grouped["device_time_ns"], errors="coerce") / _NS_PER_MS
    grouped["share"] = grouped["time_ns"] / total if total else 0.0
    return grouped.sort_values(["time_ns", "calls"], ascending=False, kind="stable")[columns].reset_index(drop=True)


def _sum_or_none(values):
    """A sum where anything was measured, else None (not a misleading 0)."""
    return float(values.sum()) if values.notna().any() else None


def _join_unique(values) -> list:
    return sorted({v for v in values if v})


def _join_unique_inner(values) -> str:
    names: dict = {}
    for text in values:
        for name, count in parse_fallback_ops(text).items():
            names[name] = names.get(name, 0) + count
    return ";".join(f"{n}={c}" for n, c in names.items())


def fallback_hotspots(ops: pd.DataFrame) -> pd.DataFrame:
    """Calls that fell back, grouped by op, ranked by time.

    ``inner_ops`` names what the backend actually sent to the CPU when the
    call was a composite (``_foreach_lerp_`` -> ``lerp.Scalar_out`` per tensor).
    """
    columns = ["op", "inner_ops", "calls", "inner_calls", "time_ms", "share", "bytes_moved", "phases", "modules", "sources"]
    fallen = ops[ops["verdict"] == "fallback"]
    if fallen.empty:
        return pd.DataFrame(columns=columns)
    total = ops["time_ns"].sum()
    grouped = (
        fallen.groupby("op", sort=False)
        .agg(
            calls=("seq", "size"),
            inner_calls=("fallback_calls", "sum"),
            time_ns=("time_ns", "sum"),
            bytes_moved=("bytes_moved", "sum"),
            inner_ops=("fallback_ops", _join_unique_inner),
            phases=("phase", _join_unique),
            modules=("module", _join_unique),
            sources=("source", _join_unique),
        )
        .reset_index()
    )
    grouped["time_ms"] = grouped["time_ns"] / _NS_PER_MS
    grouped["share"] = grouped["time_ns"] / total if total else 0.0
    grouped["inner_ops"] = grouped["inner_ops"].map(lambda s: sorted(parse_fallback_ops(s)))
    return grouped.sort_values("time_ns", ascending=False, kind="stable")[columns].reset_index(drop=True)


def cpu_hotspots(ops: pd.DataFrame) -> pd.DataFrame:
    """Calls on CPU tensors inside an accelerator step, grouped by op and source line."""
    columns = ["op", "calls", "time_ms", "phases", "modules", "sources"]
    on_cpu = ops[ops["verdict"] == "cpu"]
    if on_cpu.empty:
        return pd.DataFrame(columns=columns)
    grouped = (
        on_cpu.groupby(["op", "source"], sort=False)
        .agg(calls=("seq", "size"), time_ns=("time_ns", "sum"), phases=("phase", _join_unique),
             modules=("module", _join_unique))
        .reset_index()
    )
    grouped["sources"] = grouped["source"].map(lambda s: [s] if s else [])
    grouped["time_ms"] = grouped["time_ns"] / _NS_PER_MS
    return grouped.sort_values("time_ns", ascending=False, kind="stable")[columns].reset_index(drop=True)


def transfer_hotspots(ops: pd.DataFrame) -> pd.DataFrame:
    """Host<->device copies and syncs (not fallbacks), grouped by op, direction and source."""
    columns = ["op", "transfer", "calls", "bytes_moved", "time_ms", "phases", "modules", "sources"]
    moved = ops[(ops["transfer"] != "") & (ops["verdict"] != "fallback")]
    if moved.empty:
        return pd.DataFrame(columns=columns)
    grouped = (
        moved.groupby(["op", "transfer", "source"], sort=False)
        .agg(calls=("seq", "size"), bytes_moved=("bytes_moved", "sum"), time_ns=("time_ns", "sum"),
             phases=("phase", _join_unique), modules=("module", _join_unique))
        .reset_index()
    )
    grouped["sources"] = grouped["source"].map(lambda s: [s] if s else [])
    grouped["time_ms"] = grouped["time_ns"] / _NS_PER_MS
    return grouped.sort_values("time_ns", ascending=False, kind="stable")[columns].reset_index(drop=True)


def phase_split(ops: pd.DataFrame) -> pd.DataFrame:
    """Per phase (forward, backward, optimizer, comm, other): calls, time, fallbacks."""
    columns = ["phase", "calls", "time_ms", "share", "fallback_calls", "fallback_time_ms", "cpu_calls"]
    if ops.empty:
        return pd.DataFrame(columns=columns)
    total = ops["time_ns"].sum()
    rows = []
    order = {"forward": 0, "backward": 1, "optimizer": 2, "comm": 3, "other": 4}
    for phase, group in ops.groupby("phase", sort=False):
        fallen = group["verdict"] == "fallback"
        rows.append(
            {
                "phase": phase,
                "calls": len(group),
                "time_ms": group["time_ns"].sum() / _NS_PER_MS,
                "share": _share(group["time_ns"].sum(), total),
                "fallback_calls": int(fallen.sum()),
                "fallback_time_ms": group.loc[fallen, "time_ns"].sum() / _NS_PER_MS,
                "cpu_calls": int((group["verdict"] == "cpu").sum()),
            }
        )
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values("phase", key=lambda s: s.map(lambda p: order.get(p, 9)), kind="stable").reset_index(drop=True)


def module_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per module path, with its parents' rows including their children's calls."""
    columns = ["module", "depth", "calls", "time_ms", "device_share", "fallback_calls", "fallback_time_ms"]
    if ops.empty:
        return pd.DataFrame(columns=columns)
    totals: dict = {}
    for module, verdict, time_ns in zip(ops["module"], ops["verdict"], ops["time_ns"]):
        name = module or "(outside modules)"
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            key = ".".join(parts[:depth])
            entry = totals.setdefault(key, [0, 0, 0, 0, 0])
            entry[0] += 1
            entry[1] += time_ns
            if verdict == "device":
                entry[2] += time_ns
            elif verdict == "fallback":
                entry[3] += 1
                entry[4] += time_ns
    rows = [
        {
            "module": key,
            "depth": key.count("."),
            "calls": calls,
            "time_ms": time_ns / _NS_PER_MS,
            "device_share": _share(device_ns, time_ns),
            "fallback_calls": fallback_calls,
            "fallback_time_ms": fallback_ns / _NS_PER_MS,
        }
        for key, (calls, time_ns, device_ns, fallback_calls, fallback_ns) in totals.items()
    ]
    return pd.DataFrame(rows, columns=columns).sort_values("module", kind="stable").reset_index(drop=True)


def profiler_crosscheck(ops: pd.DataFrame, profiler_ops: pd.DataFrame) -> pd.DataFrame:
    """Our per-op totals beside torch.profiler's for the same calls.

    Joined on the profiler's spelling (``aten::addmm``, no overload). ``ratio``
    is ours / profiler's; ops the profiler does not time (it records no range
    for a few trivial ops such as ``aten::detach``) have no ratio.
    """
    columns = ["op", "calls", "time_ms", "profiler_calls", "profiler_time_ms", "ratio"]
    if ops.empty or profiler_ops is None or profiler_ops.empty:
        return pd.DataFrame(columns=columns)
    ours = (
        ops.assign(base=ops["op"].map(lambda name: name.split(".", 1)[0]))
        .groupby("base")
        .agg(calls=("seq", "size"), time_ns=("time_ns", "sum"))
    )
    theirs = profiler_ops.set_index("op")[["calls", "time_ns"]].rename(
        columns={"calls": "profiler_calls", "time_ns": "profiler_time_ns"}
    )
    joined = ours.join(theirs, how="left").reset_index().rename(columns={"base": "op"})
    joined["time_ms"] = joined["time_ns"] / _NS_PER_MS
    joined["profiler_time_ms"] = joined["profiler_time_ns"] / _NS_PER_MS
    joined["ratio"] = joined["time_ns"] / joined["profiler_time_ns"]
    return joined.sort_values("time_ms", ascending=False, kind="stable")[columns].reset_index(drop=True)
