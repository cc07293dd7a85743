"""The merged report of a distributed run, as one value (schema: docs/distributed.md).

:func:`merged_report` reads nothing and prints nothing: it turns a loaded
:class:`~dmlprof.distributed.run_dir.Run` into plain data, computed once by
:mod:`dmlprof.analysis.distributed`; :mod:`dmlprof.render.run` formats it.
"""
from __future__ import annotations

from dmlprof.analysis import distributed as merge
from dmlprof.units import fmt_ranks

SCHEMA = "dmlprof-distributed-report"
SCHEMA_VERSION = 1
_RANK_FIELDS = ("steps", "step_ms", "compute_ms", "fallback_ms", "cpu_ms", "host_ms", "comm_call_ms", "comm_ms", "other_ms",
                "busy_ms", "comm_calls", "comm_bytes", "fallback_calls", "comm_share", "fallback_share")


def merged_report(run) -> dict:
    """Everything the merged report shows, as JSON-ready data."""
    ops, collectives, steps, ranks = run.frames()
    split = merge.step_split(ops, collectives, steps)
    summary = merge.rank_summary(split)
    meta = run.first_meta()
    by_rank = {int(r["rank"]): r for r in summary.to_dict(orient="records")}
    about = {
        "model": meta.get("model"), "model_name": meta.get("model_name"), "run_mode": meta.get("run_mode"),
        "backend": meta.get("backend"), "dist_backend": (meta.get("distributed") or {}).get("backend"),
        "torch_version": meta.get("torch_version"), "dmlprof_version": meta.get("dmlprof_version"),
        "batch_size": meta.get("batch_size"), "timing": meta.get("timing"),
        "step_times": "measured per step (wall, device synchronised)" if len(steps)
        else "script: from the end of one optimizer step to the end of the next (the first recorded step has none)",
    }
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "title": f"dmlprof distributed run of {about['model_name'] or about['model']}",
        "facts": _facts(run, about),
        "run_dir": str(run.folder),
        "world_size": run.world_size,
        "ranks_found": sorted(run.sessions),
        "missing_ranks": run.missing_ranks,
        "meta": about,
        "ranks": [_rank_entry(r, by_rank.get(int(r["rank"])), split) for r in ranks.to_dict(orient="records")],
        "straggler": merge.straggler(summary, ops),
        "verdict_differences": merge.verdict_differences(ops).to_dict(orient="records"),
        "collectives": merge.collective_summary(collectives).to_dict(orient="records"),
        "errors": [{"rank": r, "line": line} for r, line in sorted(run.errors.items())]
        + [{"rank": r, "line": f"session unreadable: {why}"} for r, why in sorted(run.unreadable.items())]
        + [{"rank": None, "line": line} for line in run.ignored],
    }


def _facts(run, about: dict) -> list:
    """The run in a few ``[label, value]`` lines, as every renderer shows them first."""
    missing = f"; missing: {fmt_ranks(run.missing_ranks)}" if run.missing_ranks else ""
    facts = [["ranks", f"{len(run.sessions)} of {run.world_size} saved a session{missing}"],
             ["device", f"{about['backend']}, process group {about['dist_backend'] or 'unknown'}"],
             ["torch", about["torch_version"]], ["run", about["run_mode"]], ["steps", about["step_times"]],
             ["folder", str(run.folder)]]
    return [fact for fact in facts if fact[1] is not None]


def _rank_entry(info: dict, medians, split) -> dict:
    entry = {"rank": int(info["rank"]), "device": info.get("device"), "partial": bool(info.get("partial")),
             "partial_reason": info.get("partial_reason") or "", "error": info.get("error") or ""}
    for key in _RANK_FIELDS:
        entry[key] = None if medians is None else _number(medians.get(key))
    mine = split[split["rank"] == info["rank"]]
    entry["step_times_ms"] = [round(float(t), 3) for t in mine["step_ms"]]
    entry["comm_times_ms"] = [round(float(t), 3) for t in mine["comm_ms"].fillna(0)] if "comm_ms" in mine else []
    return entry


def _number(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if value != value else value
