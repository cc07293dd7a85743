"""Headline numbers, per-op and per-phase tables, fallback hotspots."""
from __future__ import annotations

from collections import Counter
from typing import Optional

import pandas as pd

from dmlprof.schema import CPU, DEVICE, FALLBACK, HOST, PHASES, REFUSED, VERDICTS, parse_fallback_ops, parse_ranges

_NS_PER_MS = 1e6


def _share(part, whole) -> float:
    return float(part) / float(whole) if whole else 0.0


def summary(ops: pd.DataFrame) -> dict:
    """Headline numbers for a run (the JSON report's ``summary``).

    Shares leave host bookkeeping (verdict ``host``, judged with the frame: :func:`dmlprof.schema.typed_ops_frame`)
    out of both sides: they are shares of the step's work.
    """
    verdict = ops["verdict"]
    time_ns = ops["time_ns"]
    total_ns = int(time_ns.sum())
    fallback_ns = int(time_ns[verdict == FALLBACK].sum())
    device_ns = int(time_ns[verdict == DEVICE].sum())
    host_ns = int(time_ns[verdict == HOST].sum())
    calls = len(ops)
    host_calls = int((verdict == HOST).sum())
    refused = ops["evidence"] == REFUSED  # sent to the device, which refused them: they never ran there
    ran_on_device = (verdict == DEVICE) & ~refused
    device_time = ops["device_time_ns"].dropna() if "device_time_ns" in ops else pd.Series(dtype=float)
    return {
        "op_calls": calls,
        "device_calls": int(ran_on_device.sum()),
        "refused_calls": int(refused.sum()),
        "fallback_calls": int((verdict == FALLBACK).sum()),
        "cpu_calls": int((verdict == CPU).sum()),
        "host_bookkeeping_calls": host_calls,
        "inner_fallback_calls": int(ops["fallback_calls"].sum()),
        "device_call_share": _share(ran_on_device.sum(), calls - host_calls),
        "fallback_call_share": _share((verdict == FALLBACK).sum(), calls - host_calls),
        "time_ms": total_ns / _NS_PER_MS,
        "device_time_ms_on_device": float(device_time.sum()) / _NS_PER_MS if len(device_time) else None,
        "device_op_time_ms": device_ns / _NS_PER_MS,
        "device_time_share": _share(device_ns, total_ns - host_ns),
        "fallback_time_ms": fallback_ns / _NS_PER_MS,
        "fallback_time_share": _share(fallback_ns, total_ns - host_ns),
        "cpu_time_ms": int(time_ns[verdict == CPU].sum()) / _NS_PER_MS,
        "host_bookkeeping_time_ms": host_ns / _NS_PER_MS,
        "bytes_moved": int(ops["bytes_moved"].sum()),
        "distinct_ops": int(ops["op"].nunique()),
        "distinct_fallback_ops": len(fallback_op_set(ops)),
    }


def fallback_op_set(ops: pd.DataFrame) -> set:
    """The ops the backend sent to the CPU (the inner ones, for composites)."""
    found: set = set()
    for text in ops.loc[ops["verdict"] == FALLBACK, "fallback_ops"]:
        found.update(parse_fallback_ops(text))
    return found


def op_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per (op, verdict, phase): calls, time, share of all time; slowest first.

    ``module`` and ``source`` are where the group spent most time: where to look first.
    """
    columns = ["op", "verdict", "phase", "calls", "time_ms", "device_time_ms", "share", "bytes_moved", "fallback_ops",
               "module", "source"]
    if ops.empty:
        return pd.DataFrame(columns=columns)
    total = ops["time_ns"].sum()
    keys = ["op", "verdict", "phase"]
    by = ops.groupby(keys, sort=False)
    grouped = by.agg(calls=("seq", "size"), time_ns=("time_ns", "sum"), bytes_moved=("bytes_moved", "sum"))
    # a sum where anything was measured, else missing (not a misleading 0)
    grouped["device_time_ns"] = by["device_time_ns"].sum(min_count=1)
    # only calls that fell back name inner ops: parse those few, not every call
    named = ops[ops["fallback_ops"] != ""]
    inner = named.groupby(keys, sort=False)["fallback_ops"].agg(_join_unique_inner).to_dict() if len(named) else {}
    grouped["fallback_ops"] = [inner.get(key, "") for key in grouped.index]
    grouped = grouped.reset_index()
    grouped["time_ms"] = grouped["time_ns"] / _NS_PER_MS
    grouped["device_time_ms"] = pd.to_numeric(grouped["device_time_ns"], errors="coerce") / _NS_PER_MS
    grouped["share"] = grouped["time_ns"] / total if total else 0.0
    for column in ("module", "source"):
        top = _top_by_time(ops, column)
        grouped[column] = [top.get(key, "") for key in zip(grouped["op"], grouped["verdict"], grouped["phase"])]
    return grouped.sort_values(["time_ns", "calls"], ascending=False, kind="stable")[columns].reset_index(drop=True)


def _top_by_time(ops: pd.DataFrame, column: str) -> dict:
    """(op, verdict, phase) -> the value of ``column`` under which the group spent most time (most calls on a tie)."""
    grouped = ops.groupby(["op", "verdict", "phase", column], sort=False)["time_ns"].agg(["sum", "size"]).reset_index()
    grouped = grouped.sort_values(["sum", "size"], ascending=False, kind="stable").drop_duplicates(["op", "verdict", "phase"])
    return {(o, v, p): str(x) for o, v, p, x in zip(grouped["op"], grouped["verdict"], grouped["phase"], grouped[column])}


def _ranked_by_time(frame: pd.DataFrame, column: str) -> dict:
    """op -> the non-empty values of ``column`` for its calls, most time first (then by name)."""
    grouped = frame[frame[column] != ""].groupby(["op", column], sort=False)["time_ns"].sum().reset_index()
    grouped = grouped.sort_values(["op", "time_ns", column], ascending=[True, False, True], kind="stable")
    return {str(op): [str(v) for v in group[column]] for op, group in grouped.groupby("op", sort=False)}


def _join_unique(values) -> list:
    return sorted({v for v in values if v})


def _join_unique_inner(values) -> str:
    names: dict = {}
    for text in values:
        for name, count in parse_fallback_ops(text).items():
            names[name] = names.get(name, 0) + count
    return ";".join(f"{n}={c}" for n, c in names.items())


def calls_after(ops: pd.DataFrame, first_seq: Optional[int]) -> pd.DataFrame:
    """The calls from ``first_seq`` on (a prediction's calls after a value it made up); none for None."""
    if first_seq is None:
        return ops.iloc[0:0]
    return ops[ops["seq"] >= first_seq]


def fallback_hotspots(ops: pd.DataFrame) -> pd.DataFrame:
    """Calls that fell back, grouped by op, ranked by time.

    ``inner_ops`` names what the backend actually sent to the CPU when the
    call was a composite (``_foreach_lerp_`` -> ``lerp.Scalar_out`` per tensor).
    ``modules`` and ``sources`` are ranked by the time spent under each, most
    first: the module and line to look at come first. The optimizer step's
    calls of an op are a hotspot apart from the same op's other calls: an
    exponential moving average's ``_foreach_lerp_`` is not AdamW's, and the
    fix for one leaves the other.
    """
    columns = ["op", "inner_ops", "calls", "inner_calls", "time_ms", "share", "bytes_moved", "phases", "modules", "sources"]
    fallen = ops[ops["verdict"] == FALLBACK]
    if fallen.empty:
        return pd.DataFrame(columns=columns)
    total = ops.loc[ops["verdict"] != HOST, "time_ns"].sum()
    fallen = fallen.assign(op=fallen["op"].where(fallen["phase"] != "optimizer", fallen["op"] + _IN_OPTIMIZER))
    grouped = (
        fallen.groupby("op", sort=False)
        .agg(
            calls=("seq", "size"),
            inner_calls=("fallback_calls", "sum"),
            time_ns=("time_ns", "sum"),
            bytes_moved=("bytes_moved", "sum"),
            inner_ops=("fallback_ops", _join_unique_inner),
            phases=("phase", _join_unique),
        )
        .reset_index()
    )
    for column in ("module", "source"):
        ranked = _ranked_by_time(fallen, column)
        grouped[column + "s"] = grouped["op"].map(lambda op: ranked.get(op, []))
    grouped["time_ms"] = grouped["time_ns"] / _NS_PER_MS
    grouped["share"] = grouped["time_ns"] / total if total else 0.0  # of the work: shares add up to the summary's
    grouped["inner_ops"] = grouped["inner_ops"].map(lambda s: sorted(parse_fallback_ops(s)))
    grouped["op"] = grouped["op"].str.replace(_IN_OPTIMIZER, "", regex=False)
    return grouped.sort_values("time_ns", ascending=False, kind="stable")[columns].reset_index(drop=True)


def device_calls_by_op(ops: pd.DataFrame) -> pd.DataFrame:
    """Calls the device's own kernels ran, grouped by op and dtypes: how many, and where they came from."""
    columns = ["op", "dtypes", "calls", "modules", "sources"]
    on_device = ops[ops["verdict"] == DEVICE]
    if on_device.empty:
        return pd.DataFrame(columns=columns)
    grouped = (
        on_device.groupby(["op", "dtypes"], sort=False)
        .agg(calls=("seq", "size"), modules=("module", _join_unique), sources=("source", _join_unique))
        .reset_index()
    )
    return grouped.sort_values("calls", ascending=False, kind="stable")[columns].reset_index(drop=True)


#: a key suffix, for as long as a hotspot's calls are grouped: no op name holds a space
_IN_OPTIMIZER = " (optimizer)"


def cpu_hotspots(ops: pd.DataFrame, verdict: str = CPU) -> pd.DataFrame:
    """Calls on CPU tensors inside an accelerator step, grouped by op and source line (``verdict``:
    ``host`` for the host's bookkeeping instead)."""
    columns = ["op", "calls", "time_ms", "phases", "modules", "sources"]
    on_cpu = ops[ops["verdict"] == verdict]
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
    moved = ops[(ops["transfer"] != "") & (ops["verdict"] != FALLBACK)]
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
    order = {phase: rank for rank, phase in enumerate(PHASES)}
    for phase, group in ops.groupby("phase", sort=False):
        fallen = group["verdict"] == FALLBACK
        rows.append(
            {
                "phase": phase,
                "calls": len(group),
                "time_ms": group["time_ns"].sum() / _NS_PER_MS,
                "share": _share(group["time_ns"].sum(), total),
                "fallback_calls": int(fallen.sum()),
                "fallback_time_ms": group.loc[fallen, "time_ns"].sum() / _NS_PER_MS,
                "cpu_calls": int((group["verdict"] == CPU).sum()),
            }
        )
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values("phase", key=lambda s: s.map(lambda p: order.get(p, len(PHASES))), kind="stable").reset_index(drop=True)


def module_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per module path, with its parents' rows including their children's calls.

    Parents come before their children, children in natural order (``blocks.2`` before ``blocks.10``).
    ``device_share`` is of the module's work: its time less the host's bookkeeping (verdict ``host``).
    """
    columns = ["module", "depth", "calls", "time_ms", "device_share", "fallback_calls", "fallback_time_ms",
               "host_bookkeeping_time_ms"]
    if ops.empty:
        return pd.DataFrame(columns=columns)
    device, fallback, host = ops["verdict"] == DEVICE, ops["verdict"] == FALLBACK, ops["verdict"] == HOST
    per_module = (
        ops.assign(name=ops["module"].where(ops["module"] != "", "(outside modules)"),
                   device_ns=ops["time_ns"].where(device, 0), fallback=fallback.astype("int64"),
                   fallback_ns=ops["time_ns"].where(fallback, 0), host_ns=ops["time_ns"].where(host, 0))
        .groupby("name", sort=False)[["seq", "time_ns", "device_ns", "fallback", "fallback_ns", "host_ns"]]
        .agg({"seq": "size", "time_ns": "sum", "device_ns": "sum", "fallback": "sum", "fallback_ns": "sum",
              "host_ns": "sum"})
    )
    totals: dict = {}  # each module's own calls, added to it and to every parent (a few thousand paths, not every call)
    for name, row in zip(per_module.index, per_module.itertuples(index=False)):
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            entry = totals.setdefault(".".join(parts[:depth]), [0, 0, 0, 0, 0, 0])
            for i, value in enumerate(row):
                entry[i] += int(value)
    rows = [
        {
            "module": key,
            "depth": key.count("."),
            "calls": calls,
            "time_ms": time_ns / _NS_PER_MS,
            "device_share": _share(device_ns, time_ns - host_ns),
            "fallback_calls": fallback_calls,
            "fallback_time_ms": fallback_ns / _NS_PER_MS,
            "host_bookkeeping_time_ms": host_ns / _NS_PER_MS,
        }
        for key, (calls, time_ns, device_ns, fallback_calls, fallback_ns, host_ns) in totals.items()
    ]
    rows.sort(key=lambda row: _natural_path(row["module"]))
    return pd.DataFrame(rows, columns=columns)


def range_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per ``record_function`` range of the scanned code, in the order the run first entered each: the
    calls inside it (nested ranges' too; a call counts once under a name, however deep it recurses),
    their time, and what fell back there, inner ops most calls first."""
    columns = ["range", "occurrences", "calls", "time_ms", "fallback_calls", "fallback_time_ms", "fallback_ops"]
    inside = ops[ops["ranges"] != ""] if "ranges" in ops and not ops.empty else ops.iloc[0:0]
    totals: dict = {}  # name -> [occurrences seen, calls, time_ns, fallback calls, fallback ns, Counter of inner ops]
    for text, verdict, time_ns, fallback_ops in zip(inside["ranges"], inside["verdict"], inside["time_ns"],
                                                    inside["fallback_ops"]):
        ranges = parse_ranges(text)
        for name in dict.fromkeys(name for name, _ in ranges):
            entry = totals.setdefault(name, [set(), 0, 0, 0, 0, Counter()])
            entry[0].update(number for other, number in ranges if other == name)
            entry[1] += 1
            entry[2] += int(time_ns)
            if verdict == FALLBACK:
                entry[3] += 1
                entry[4] += int(time_ns)
                entry[5].update(parse_fallback_ops(fallback_ops))
    rows = [{"range": name, "occurrences": len(seen), "calls": calls, "time_ms": time_ns / _NS_PER_MS,
             "fallback_calls": fallback_calls, "fallback_time_ms": fallback_ns / _NS_PER_MS,
             "fallback_ops": [op for op, _ in inner.most_common()]}
            for name, (seen, calls, time_ns, fallback_calls, fallback_ns, inner) in totals.items()]
    return pd.DataFrame(rows, columns=columns)


def _natural_path(module: str) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in module.split("."))


def time_by_op(ops: pd.DataFrame) -> pd.DataFrame:
    """Per op, its time split by verdict (``device_ms``, ``fallback_ms``, ``cpu_ms``, ``host_ms``, ``time_ms``);
    slowest first."""
    columns = ["op"] + [f"{verdict}_ms" for verdict in VERDICTS] + ["time_ms"]
    if ops.empty:
        return pd.DataFrame(columns=columns)
    by = ops.groupby(["op", "verdict"], sort=False)["time_ns"].sum().unstack(fill_value=0)
    for verdict in VERDICTS:
        if verdict not in by:
            by[verdict] = 0
    by["total"] = by[list(VERDICTS)].sum(axis=1)
    by = by.sort_values("total", ascending=False, kind="stable").reset_index()
    for verdict in VERDICTS:
        by[f"{verdict}_ms"] = by[verdict] / _NS_PER_MS
    by["time_ms"] = by["total"] / _NS_PER_MS
    return by[columns]


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


SUBSTANTIAL_CALL_MS = 0.2


def split_fixed_cost(check: pd.DataFrame) -> tuple[float, pd.DataFrame]:
    """The per-call fixed cost of our timer, and the ops that take real time with it taken off.

    Each timer costs something per call beyond torch.profiler's range (calling the op from
    Python, tens of microseconds on a loaded machine). On the small ops (under
    ``SUBSTANTIAL_CALL_MS`` a call by the profiler) that difference is all there is, so its mean
    per call there is the fixed cost; the ops at or above the line get
    ``ratio_less_fixed_cost`` = (ours - calls x fixed cost) / profiler's. ``check`` is
    :func:`profiler_crosscheck`'s frame, rows without a profiler time dropped.
    """
    per_call_ms = check["profiler_time_ms"] / check["profiler_calls"]
    small = check[per_call_ms < SUBSTANTIAL_CALL_MS]
    excess_ms = (small["time_ms"] - small["profiler_time_ms"]).sum()
    fixed_cost_ms = max(float(excess_ms) / max(int(small["calls"].sum()), 1), 0.0)
    substantial = check[per_call_ms >= SUBSTANTIAL_CALL_MS]
    work_ms = substantial["time_ms"] - substantial["calls"] * fixed_cost_ms
    return fixed_cost_ms, substantial.assign(work_ms=work_ms,
                                             ratio_less_fixed_cost=work_ms / substantial["profiler_time_ms"])
