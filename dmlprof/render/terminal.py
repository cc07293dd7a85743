"""The terminal report (tabulate): headline, fallback hotspots, per-op table, phases."""
from __future__ import annotations

from dmlprof import analysis
from dmlprof.render.format import clean, fmt_bytes, fmt_list, fmt_ms, fmt_share, table


def render_text(session, top: int = 15) -> str:
    """The whole report as plain text (ASCII only, safe on any console)."""
    meta, ops = session.meta, session.ops
    head = analysis.summary(ops)
    lines = []
    title = clean(f"dmlprof {meta.get('mode', 'live')} scan of {meta.get('model_name') or meta.get('model')}")
    lines.append(title)
    lines.append("=" * len(title))
    device = f"{meta.get('backend')} ({meta.get('device_name')})"
    facts = [
        ("device", device),
        ("torch", meta.get("torch_version")),
        ("run", _run_line(meta)),
        ("timing", meta.get("timing", "")),
    ]
    if meta.get("table_version"):
        facts.append(("op table", meta["table_version"]))
    if meta.get("recording", "").startswith("one structure step"):
        facts.append(("recording", "one structure step through the dispatcher; measured steps timed by torch.profiler"))
    for note in meta.get("notes", []):
        facts.append(("note", note))
    if meta.get("partial"):
        facts.append(("PARTIAL", f"stopped early: {meta.get('partial_reason', '')}"))
    loss = meta.get("nonfinite_loss")
    if isinstance(loss, dict):
        facts.append(("LOSS", f"{loss.get('value')} at training step {loss.get('step')} of {loss.get('steps_run')} "
                              "(warm-up included): the training diverges"))
    lines.append(table(facts, tablefmt="plain"))
    lines.append("")
    lines.append(
        f"{head['op_calls']} op calls: {head['device_calls']} on the device, "
        f"{head['fallback_calls']} fell back to the CPU, {head['cpu_calls']} on CPU tensors"
    )
    timed = meta.get("mode") != "predicted"  # a prediction has calls, not times
    if timed:
        lines.append(
            f"device share: {fmt_share(head['device_call_share'])} of calls, {fmt_share(head['device_time_share'])} of time; "
            f"fallback: {fmt_ms(head['fallback_time_ms'])} = {fmt_share(head['fallback_time_share'])} of op time "
            f"({fmt_ms(head['time_ms'])} total)"
        )
    else:
        lines.append(f"device share: {fmt_share(head['device_call_share'])} of calls (predicted: no times)")
    if meta.get("step_times_ms"):
        steps = meta["step_times_ms"]
        lines.append(f"step time: {fmt_ms(sorted(steps)[len(steps) // 2])} median over {len(steps)} measured steps")

    verification = session.extras.get("verify") if isinstance(session.extras, dict) else None
    if verification is not None:
        lines.append("")
        lines.extend(_verification(verification, top))

    hotspots = analysis.fallback_hotspots(ops)
    lines.append("")
    if hotspots.empty:
        if session.meta.get("backend") == "cpu":
            lines.append("Fallbacks: none possible (the CPU is the device). Use --device or --target dml to check an accelerator.")
        else:
            lines.append("Fallbacks: none - every call on device tensors ran on the device.")
    else:
        lines.append(f"Fallback hotspots (top {min(top, len(hotspots))} of {len(hotspots)})")
        rows = []
        for row in hotspots.head(top).itertuples():
            inner = ", ".join(row.inner_ops)
            op = row.op if inner in ("", row.op) else f"{row.op} -> {inner}"
            rows.append([op, row.calls] + _if(timed, fmt_ms(row.time_ms), fmt_share(row.share))
                        + [fmt_bytes(row.bytes_moved), fmt_list(row.modules, 1), fmt_list(row.sources, 1)])
        lines.append(table(rows, headers=["op (-> what fell back)", "calls"] + _if(timed, "time", "share")
                              + ["moved", "module", "source"]))
        advice = _advice(session, hotspots)
        if advice:
            lines.append("")
            lines.extend(advice)

    transfers = analysis.transfer_hotspots(ops)
    if not transfers.empty and session.meta.get("backend") != "cpu":
        lines.append("")
        lines.append("Host<->device copies and syncs")
        rows = [[r.op, r.transfer, r.calls, fmt_bytes(r.bytes_moved)] + _if(timed, fmt_ms(r.time_ms))
                + [fmt_list(r.phases, 2), fmt_list(r.sources, 1)] for r in transfers.head(top).itertuples()]
        lines.append(table(rows, headers=["op", "direction", "calls", "moved"] + _if(timed, "time") + ["phase", "source"]))

    on_cpu = analysis.cpu_hotspots(ops)
    if not on_cpu.empty:
        lines.append("")
        lines.append("Calls on CPU tensors inside the step (their tensors were not on the device)")
        rows = [[r.op, r.calls] + _if(timed, fmt_ms(r.time_ms)) + [fmt_list(r.phases, 2), fmt_list(r.modules, 1), fmt_list(r.sources, 1)]
                for r in on_cpu.head(top).itertuples()]
        lines.append(table(rows, headers=["op", "calls"] + _if(timed, "time") + ["phase", "module", "source"]))

    per_op = analysis.op_summary(ops)
    if not timed:
        per_op = per_op.sort_values("calls", ascending=False, kind="stable")
    lines.append("")
    lines.append(f"Ops by {'time' if timed else 'calls'} (top {min(top, len(per_op))} of {len(per_op)})")
    with_device = bool(per_op["device_time_ms"].notna().any())
    rows = [[r.op, r.verdict, r.phase, r.calls] + _if(timed, fmt_ms(r.time_ms)) + _if(with_device, fmt_ms(r.device_time_ms))
            + _if(timed, fmt_share(r.share)) for r in per_op.head(top).itertuples()]
    headers = ["op", "verdict", "phase", "calls"] + _if(timed, "host time" if with_device else "time")
    lines.append(table(rows, headers=headers + _if(with_device, "device time") + _if(timed, "share")))

    phases = analysis.phase_split(ops)
    lines.append("")
    lines.append("By phase")
    rows = [[r.phase, r.calls] + _if(timed, fmt_ms(r.time_ms), fmt_share(r.share)) + [r.fallback_calls]
            + _if(timed, fmt_ms(r.fallback_time_ms)) + [r.cpu_calls] for r in phases.itertuples()]
    lines.append(table(rows, headers=["phase", "calls"] + _if(timed, "time", "share") + ["fallbacks"]
                          + _if(timed, "fallback time") + ["cpu calls"]))

    comparison = session.extras.get("replace") if isinstance(session.extras, dict) else None
    if comparison:
        from dmlprof.replacements.compare import format_comparison

        lines.append("")
        lines.append(format_comparison(comparison))

    if meta.get("warnings"):
        lines.append("")
        lines.append(f"Other warnings while recording ({len(meta['warnings'])} distinct):")
        for warning in meta["warnings"][:5]:
            message = (warning["message"].splitlines() or [""])[0][:150]
            lines.append(clean(f"  {warning['category']} x{warning['count']}: {message}"))
    text = "\n".join(lines)
    return text.encode("ascii", "replace").decode("ascii")


def _if(condition: bool, *cells) -> list:
    """Table cells (or headers) that only belong when ``condition`` holds."""
    return list(cells) if condition else []


def _verification(verify: dict, top: int) -> list:
    """The --verify section: divergent ops, lost updates, what was not checked."""
    from dmlprof.verify import summary

    data = summary(verify)
    lines = [data["headline"]]
    for note in data["notes"]:
        lines.append(clean(f"  note: {note}"))
    if data["divergent_ops"]:
        lines.append("")
        lines.append("Ops whose device result differs from the CPU's (recomputed from the same inputs)")
        rows = [[r["op"], r["what"], r["calls"], _error(r["max_abs_error"]), _error(r["max_rel_error"]),
                 "x".join(str(n) for n in r["output_shape"]) or "-", r["output_dtype"], r["phase"],
                 r["module"] or "-", r["source"] or "-"] for r in data["divergent_ops"][:top]]
        lines.append(table(rows, headers=["op", "result", "calls", "max abs err", "max rel err", "shape",
                                             "dtype", "phase", "module", "source"]))
        for r in data["divergent_ops"][:top]:
            if r["reason"] != "values differ beyond tolerance":
                lines.append(clean(f"  {r['op']} ({r['what']}): {r['reason']}"))
    if data["lost_updates"]:
        lines.append("")
        lines.append("Lost updates: parameters unchanged by optimizer.step() although their gradient was non-zero")
        rows = [[r["parameter"], "x".join(str(n) for n in r["shape"]), r["dtype"], r["optimizer"], r["steps"],
                 _error(r["max_abs_grad"])] for r in data["lost_updates"][:max(top, 30)]]
        lines.append(table(rows, headers=["parameter", "shape", "dtype", "optimizer", "steps", "max |grad|"]))
    if data["skipped"]:
        skipped = "; ".join(f"{s['reason']}: {s['calls']} calls ({fmt_list(s['ops'], 3)})" for s in data["skipped"])
        lines.append(clean(f"  not checked: {skipped}"))
    return lines


def _error(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def _run_line(meta) -> str:
    if meta.get("run_mode") == "script":
        return f"script mode (recorded the whole run; {meta.get('steps', 0)} optimizer steps seen)"
    if meta.get("run_mode") == "block":
        return f"dmlprof.profile() block ({meta.get('steps', 0)} optimizer steps seen)"
    return (
        f"model contract, batch size {meta.get('batch_size')}, {meta.get('warmup_steps', 0)} warm-up + "
        f"{meta.get('steps', 0)} measured steps, optimizer {meta.get('optimizer', '?')}"
    )


def _advice(session, hotspots) -> list:
    """One line per hotspot that has a known fix (filled by replacements when present)."""
    try:
        from dmlprof.replacements import advice_for
    except ImportError:
        return []
    lines = []
    for row in hotspots.itertuples():
        for op in row.inner_ops or [row.op]:
            tip = advice_for(op)
            if tip:
                lines.append(f"  fix {op}: {tip}")
    return sorted(set(lines), key=lines.index)
