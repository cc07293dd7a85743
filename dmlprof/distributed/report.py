"""The merged report of a distributed run: one value, then text, JSON or HTML.

:func:`merged_report` reads nothing and prints nothing: it turns a loaded
:class:`~dmlprof.distributed.run_dir.Run` into plain data (schema:
docs/distributed.md), computed once by :mod:`dmlprof.analysis.distributed`.
The renderers format that value; they never change it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tabulate import tabulate

from dmlprof.analysis import distributed as merge
from dmlprof.render.format import clean, clean_all, fmt_bytes, fmt_ms, fmt_ranks, fmt_share

SCHEMA = "dmlprof-distributed-report"
SCHEMA_VERSION = 1
_RANK_FIELDS = ("steps", "step_ms", "compute_ms", "fallback_ms", "cpu_ms", "comm_call_ms", "comm_ms", "other_ms",
                "busy_ms", "comm_calls", "comm_bytes", "fallback_calls", "comm_share", "fallback_share")


def merged_report(run) -> dict:
    """Everything the merged report shows, as JSON-ready data."""
    ops, collectives, steps, ranks = run.frames()
    split = merge.step_split(ops, collectives, steps)
    summary = merge.rank_summary(split)
    meta = run.first_meta()
    by_rank = {int(r["rank"]): r for r in summary.to_dict(orient="records")}
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run_dir": str(run.folder),
        "world_size": run.world_size,
        "ranks_found": sorted(run.sessions),
        "missing_ranks": run.missing_ranks,
        "meta": {
            "model": meta.get("model"), "model_name": meta.get("model_name"), "run_mode": meta.get("run_mode"),
            "backend": meta.get("backend"), "dist_backend": (meta.get("distributed") or {}).get("backend"),
            "torch_version": meta.get("torch_version"), "dmlprof_version": meta.get("dmlprof_version"),
            "batch_size": meta.get("batch_size"), "timing": meta.get("timing"),
            "step_times": "measured per step (wall, device synchronised)" if len(steps)
            else "script: from the end of one optimizer step to the end of the next (the first recorded step has none)",
        },
        "ranks": [_rank_entry(r, by_rank.get(int(r["rank"])), split) for r in ranks.to_dict(orient="records")],
        "straggler": merge.straggler(summary, ops),
        "verdict_differences": merge.verdict_differences(ops).to_dict(orient="records"),
        "collectives": merge.collective_summary(collectives).to_dict(orient="records"),
        "errors": [{"rank": r, "line": line} for r, line in sorted(run.errors.items())]
        + [{"rank": r, "line": f"session unreadable: {why}"} for r, why in sorted(run.unreadable.items())]
        + [{"rank": None, "line": line} for line in run.ignored],
    }


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


# -- text ---------------------------------------------------------------------------
def render_text(report: dict, top: int = 15) -> str:
    """The merged report as plain ASCII text (every name from the run folder through the one sanitiser)."""
    report = clean_all(report)
    meta = report["meta"]
    title = f"dmlprof distributed run of {meta.get('model_name') or meta.get('model')}"
    lines = [title, "=" * len(title)]
    facts = [("ranks", f"{len(report['ranks_found'])} of {report['world_size']} saved a session"
              + (f"; missing: {fmt_ranks(report['missing_ranks'])}" if report["missing_ranks"] else "")),
             ("device", f"{meta.get('backend')}, process group {meta.get('dist_backend') or 'unknown'}"),
             ("torch", meta.get("torch_version")), ("run", meta.get("run_mode")), ("steps", meta.get("step_times")),
             ("folder", report["run_dir"])]
    lines.append(tabulate([(k, v) for k, v in facts if v is not None], tablefmt="plain"))
    for error in report["errors"]:
        lines.append(f"ERROR   {error_text(error)}")
    lines += ["", "Per rank (median step)"]
    rows = [[r["rank"], r["steps"], fmt_ms(r["step_ms"]), fmt_ms(r["compute_ms"]), fmt_ms(r["fallback_ms"]),
             fmt_ms(r["cpu_ms"]), fmt_ms(r["comm_ms"]), fmt_share(r["comm_share"]), fmt_ms(r["other_ms"]),
             _calls(r["comm_calls"]), fmt_bytes(r["comm_bytes"]) if r["comm_bytes"] is not None else "-",
             _status(r)] for r in report["ranks"]]
    lines.append(tabulate(rows, headers=["rank", "steps", "step", "compute", "fallback", "host calls", "comm",
                                         "comm share", "other", "collectives", "bytes", "status"]))
    lines += [""] + _straggler_lines(report["straggler"])
    lines += [""] + _difference_lines(report["verdict_differences"], top)
    if report["collectives"]:
        lines += ["", "Collectives (all steps)"]
        rows = [[c["rank"], c["collective"], c["op"], c["calls"], fmt_bytes(c["bytes"]), fmt_ms(c["call_time_ms"]),
                 fmt_ms(c["comm_time_ms"])] for c in report["collectives"][: top * max(1, len(report["ranks"]))]]
        lines.append(tabulate(rows, headers=["rank", "collective", "op", "calls", "bytes", "in the call", "collective"]))
    text = "\n".join(lines)
    return text.encode("ascii", "replace").decode("ascii")


def error_text(error: dict) -> str:
    """``rank N: what happened`` (the line as the rank wrote it, with its rank)."""
    line = str(error["line"])
    return line if line.startswith("rank ") else f"rank {error['rank']}: {line}"


def _calls(value) -> str:
    return "-" if value is None else f"{value:g}"


def _status(rank: dict) -> str:
    if rank["error"]:
        return "failed"
    return "partial" if rank["partial"] else "ok"


def straggler_sentence(straggler: dict) -> str:
    """The straggler and why, in one sentence (or why none is named)."""
    if straggler["rank"] is None:
        if straggler["threshold_ms"] is None:
            return "Straggler: none (fewer than two ranks with measured steps)."
        return (f"Straggler: none. No rank is busy {fmt_ms(straggler['threshold_ms'])} (10% of a step) longer than "
                f"the others (largest difference {fmt_ms(straggler['busy_excess_ms'])}).")
    parts = []
    for key, what in (("fallback_excess_ms", "in calls that fell back to the CPU"),
                      ("cpu_excess_ms", "in calls on CPU tensors (host work)"),
                      ("compute_excess_ms", "in device compute")):
        if straggler[key] >= 0.05 * straggler["busy_excess_ms"] and straggler[key] > 0:
            parts.append(f"{fmt_ms(straggler[key])} {what}")
    why = "; ".join(parts) or "spread over many calls"
    return (f"Straggler: rank {straggler['rank']}, busy {fmt_ms(straggler['busy_excess_ms'])} longer per step than "
            f"the others, who wait for it in their collectives ({fmt_ms(straggler['others_comm_excess_ms'])} more "
            f"comm per step). Its extra time per step: {why}.")


def _straggler_lines(straggler: dict) -> list:
    lines = [straggler_sentence(straggler)]
    if straggler["ops"]:
        rows = [[o["op"], o["verdict"], fmt_ms(o["rank_ms_per_step"]), fmt_ms(o["others_ms_per_step"]),
                 fmt_ms(o["excess_ms_per_step"])] for o in straggler["ops"]]
        lines.append(tabulate(rows, headers=["op", "verdict", f"rank {straggler['rank']}/step", "others/step", "extra"]))
    return lines


def _difference_lines(differences: list, top: int) -> list:
    if not differences:
        return ["Verdicts: every op has the same verdicts and calls per step on every rank."]
    lines = [f"Ops whose verdict differs between ranks ({len(differences)}; calls per step)"]
    rows = [[d["op"]] + [_verdicts(v) for _, v in sorted(d["by_rank"].items())] for d in differences[:top]]
    ranks = sorted(differences[0]["by_rank"])
    lines.append(tabulate(rows, headers=["op"] + [f"rank {r}" for r in ranks]))
    return lines


def _verdicts(counts: dict) -> str:
    return ", ".join(f"{verdict} {value:g}" for verdict, value in sorted(counts.items())) or "never called"


# -- JSON and HTML ----------------------------------------------------------------------
def render_json(report: dict) -> str:
    from dmlprof.plain import plain

    return json.dumps(plain(report), indent=2, allow_nan=False)


def render_html(report: dict) -> str:
    """One self-contained HTML file (inline CSS, no script); everything from the run is escaped, and the page
    loads nothing (the single-run report's environment and document head: autoescape, Content-Security-Policy)."""
    from dmlprof.render.html import environment

    env = environment("dmlprof.distributed")
    env.filters.update(verdicts=_verdicts, ranks=fmt_ranks)
    bars = [_bar(r) for r in report["ranks"]]
    return env.get_template("run.html.j2").render(report=report, bars=bars, status=_status, error_text=error_text,
                                                  straggler=straggler_sentence(report["straggler"]))


def _bar(rank: dict) -> list:
    """(part, share of the step) for the stacked bar of one rank."""
    step = rank["step_ms"] or 0
    if not step:
        return []
    parts = [("compute", rank["compute_ms"]), ("fallback", rank["fallback_ms"]), ("host", rank["cpu_ms"]),
             ("comm call", rank["comm_call_ms"]), ("other", rank["other_ms"])]
    return [(name, min(1.0, (value or 0) / step)) for name, value in parts if value]


# -- the command ------------------------------------------------------------------------
def write_reports(report: dict, args) -> None:
    """--json and --html of ``dmlprof report RUN_DIR`` (and of the rank that prints the merged report)."""
    from dmlprof.cli.output import _write

    if getattr(args, "json", None):
        _write(Path(args.json), render_json(report), "JSON report")
    if getattr(args, "html", None):
        _write(Path(args.html), render_html(report), "HTML report")


def write_rank_traces(run, args) -> None:
    """--tb DIR: each rank's trace under ``DIR/<run folder>/`` (what ``dmlprof view DIR`` shows as one run)."""
    from dmlprof.distributed.trace import write_rank_trace

    for rank, session in sorted(run.sessions.items()):
        if len(session.ops) and int(session.ops["time_ns"].sum()) > 0:
            path = write_rank_trace(session, Path(args.tb), run.folder.name)
            print(clean(f"TensorBoard trace of rank {rank} written to {path}"), file=sys.stderr)


def print_run(folder, args, traces: bool = False) -> dict:
    """Load a run folder, write --json/--html (and, with ``traces``, --tb: the ranks of a scan wrote their own),
    print the text report unless --quiet or a report goes to standard output; returns the report."""
    from dmlprof.cli.output import to_stdout
    from dmlprof.distributed.run_dir import load_run

    run = load_run(folder)
    report = merged_report(run)
    write_reports(report, args)
    if traces and getattr(args, "tb", None):
        write_rank_traces(run, args)
    if not getattr(args, "quiet", False) and not to_stdout(args):
        print(render_text(report, top=getattr(args, "top", 15)))
    where = sys.stderr if to_stdout(args) else sys.stdout
    if not getattr(args, "quiet", False) or to_stdout(args):
        print(clean(f"\nrun saved to {folder}  (re-render: dmlprof report {folder})"), file=where)
    sys.stdout.flush()
    return report
