"""The merged report of a distributed run (:func:`dmlprof.report.run.merged_report`) as text, JSON or
HTML: the renderers format that value; they never change it."""
from __future__ import annotations

import json

from tabulate import tabulate

from dmlprof.render.format import clean_all, fmt_bytes, fmt_ms, fmt_share


# -- text ---------------------------------------------------------------------------
def render_text(report: dict, top: int = 15) -> str:
    """The merged report as plain ASCII text (every name from the run folder through the one sanitiser)."""
    report = clean_all(report)
    title = report["title"]
    lines = [title, "=" * len(title)]
    lines.append(tabulate(report["facts"], tablefmt="plain"))
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

    env = environment()
    env.filters.update(verdicts=_verdicts)
    bars = [_bar(r) for r in report["ranks"]]
    return env.get_template("run.html.j2").render(report=report, bars=bars, status=_status, error_text=error_text,
                                                  straggler=straggler_sentence(report["straggler"]))


def _bar(rank: dict) -> list:
    """(part, share of the step) for the stacked bar of one rank."""
    step = rank["step_ms"] or 0
    if not step:
        return []
    parts = [("compute", rank["compute_ms"]), ("fallback", rank["fallback_ms"]), ("host", rank["cpu_ms"]),
             ("host", rank.get("host_ms")), ("comm call", rank["comm_call_ms"]), ("other", rank["other_ms"])]
    return [(name, min(1.0, (value or 0) / step)) for name, value in parts if value]
