"""``build_report(session) -> Report``: every analysis a report shows, run once.

Reads the Session (its op frame, its run metadata, what other commands put in
``extras``) and returns plain, frozen data; the renderers only format it.
Extras are input from a file: anything malformed there is left out of the
report, never a traceback.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

import pandas as pd

from dmlprof import analysis
from dmlprof.analysis.timeline import LANES, step_spans, timeline
from dmlprof.analysis.sweep import KNEE_MIN_GROWTH, fits_budget, growth_per_doubling, sweep_frame
from dmlprof.analysis.fallback_cost import fallback_round_trips, saving_ms
from dmlprof.analysis.verification import summary as verification_summary
from dmlprof.meta import SWEEP, RunMeta
from dmlprof.replacements.catalog import advice_for, replacement_for
from dmlprof.report.model import (
    FallbackCosts, Fix, GuessNote, HostCallRow, Hotspot, ModuleRow, OpRow, OpTime, PhaseRow, RangeRow, Report, StepSpan,
    Summary, Timeline, TorchPaths, TransferRow, VerdictShare, VerdictSplit,
)
from dmlprof.report.known_wrong import known_wrong_results
from dmlprof.report.replace import RemainingOp, ReplaceComparison, ReplaceSide
from dmlprof.report.sweep import SweepReport, SweepRow
from dmlprof.report.verification import DivergentOp, LostUpdate, Unchecked, Verification
from dmlprof.report.notes import lead_notes
from dmlprof.report.verdict import verdict_of
from dmlprof.schema import CPU, DEVICE, FALLBACK, HOST, REFUSED, parse_fallback_ops
from dmlprof.tables.adapter_costs import AdapterCosts, load_adapter_costs
from dmlprof.tables.drift import BASELINE_TORCH, path_drift, path_note
from dmlprof.tables.measured import load_measured

#: a size whose step p95 exceeds this many times its p50 is marked noisy
NOISY_P95_OVER_P50 = 2.0


def build_report(session) -> Report:
    """The report of a Session (live, predicted or sweep), every figure computed once."""
    run = session.meta
    ops = session.ops  # its verdicts are final (host bookkeeping included: dmlprof.schema.typed_ops_frame)
    guess = run.prediction.guess if run.prediction is not None else None
    after = analysis.calls_after(ops, guess.first_seq if guess is not None else None)
    torch_only = _torch_only(run, ops)
    report = Report(
        run=run,
        summary=Summary(**analysis.summary(ops)),
        hotspots=_hotspots(analysis.fallback_hotspots(ops), set(after["op"]), torch_only),
        ops=tuple(_op_row(r, set(zip(after["op"], after["verdict"], after["phase"])))
                  for r in analysis.op_summary(ops).itertuples()),
        phases=tuple(PhaseRow(str(r.phase), int(r.calls), float(r.time_ms), float(r.share), int(r.fallback_calls),
                              float(r.fallback_time_ms), int(r.cpu_calls)) for r in analysis.phase_split(ops).itertuples()),
        modules=tuple(ModuleRow(str(r.module), int(r.depth), int(r.calls), float(r.time_ms), float(r.device_share),
                                int(r.fallback_calls), float(r.fallback_time_ms), float(r.host_bookkeeping_time_ms),
                                run.module_classes.get(str(r.module)))
                      for r in analysis.module_summary(ops).itertuples()),
        ranges=tuple(RangeRow(str(r.range), int(r.occurrences), int(r.calls), float(r.time_ms), int(r.fallback_calls),
                              float(r.fallback_time_ms), tuple(r.fallback_ops))
                     for r in analysis.range_summary(ops).itertuples()),
        # On the CPU every copy is host to host: nothing crosses a bus
        transfers=() if run.device.is_cpu else tuple(_transfer(r) for r in analysis.transfer_hotspots(ops).itertuples()),
        host_calls=_host_rows(analysis.cpu_hotspots(ops)),
        host_bookkeeping=_host_rows(analysis.cpu_hotspots(ops, HOST)),
        time_by_op=tuple(OpTime(str(r.op), float(r.device_ms), float(r.fallback_ms), float(r.cpu_ms), float(r.time_ms),
                                float(r.host_ms)) for r in analysis.time_by_op(ops).itertuples()),
        verification=_verification(session.verify),
        replace=_replace(session.replace),
        sweep=_sweep(session.sweep, run),
        extras=session.extras,
        torch_paths=_torch_paths(run, ops),
        known_wrong_results=_known_wrong_results(run, ops),
        guess=GuessNote(guess.op, guess.why, guess.source, len(after), len(ops)) if guess is not None else None,
        timeline=_timeline(ops) if not run.is_prediction else None,
    )
    report = _priced(report, ops)
    # the verdict reads the whole report (its failure, its verification, its fixes): decided last, once
    return replace(report, verdict=verdict_of(report), verdict_split=_verdict_split(report.summary),
                   notes=lead_notes(report))


def _priced(report: Report, ops) -> Report:
    """A DirectML stand-in's report (a prediction, the emulated device) with its fallbacks priced on the reference
    adapter class: each hotspot's round trip and what fixing it saves, modelled (dmlprof.analysis.fallback_cost).
    Other sessions as they are: a live device's times are its own."""
    run = report.run
    if run.kind == SWEEP or not report.hotspots or not _directml_stand_in(run):
        return report
    costs = load_adapter_costs()
    trips = fallback_round_trips(ops, costs)
    by_hotspot = trips.groupby([trips["op"], trips["phase"] == "optimizer"])["round_trip_us"].sum()
    steps = max(int(run.steps or 1), 1)
    hotspots = tuple(_priced_hotspot(h, by_hotspot, steps, costs) for h in report.hotspots)
    counted = [h for h in hotspots if h.saving_ms is not None and h.torch_flag is None]
    return replace(report, hotspots=hotspots, fallback_costs=FallbackCosts(
        adapter=costs.name, measured=costs.measured,
        cpu_kernel="the bytes each call moves over the CPU throughput measured on that GPU's host",
        round_trip_ms=float(trips["round_trip_us"].sum()) / steps / 1e3,
        saving_ms=sum(h.saving_ms for h in counted) if counted else None,
        priced_round_trip_ms=sum(h.round_trip_ms for h in counted),
        unpriced_ops=tuple(h.op for h in hotspots if h.saving_ms is None and h.torch_flag is None)))


def _priced_hotspot(hotspot: Hotspot, by_hotspot, steps: int, costs: AdapterCosts) -> Hotspot:
    round_trip_ms = float(by_hotspot.get((hotspot.op, hotspot.phases == ("optimizer",)), 0.0)) / steps / 1e3
    added = _added_calls(hotspot)
    added = None if added is None else added / steps
    return replace(hotspot, round_trip_ms=round_trip_ms, added_calls=added,
                   saving_ms=saving_ms(round_trip_ms, added, costs))


def _added_calls(hotspot: Hotspot) -> Optional[float]:
    """Device calls the hotspot's replacement runs in place of its calls (over the recording), None where its
    replacement's calls were not counted (dmlprof.replacements.catalog)."""
    for op in hotspot.inner_ops or (hotspot.op,):
        found = replacement_for(op)
        if found is not None and found.added_calls is not None:
            per_call, per_inner_call = found.added_calls
            return per_call * hotspot.calls + per_inner_call * hotspot.inner_calls
    return None


def _verdict_split(head: Summary) -> VerdictSplit:
    """Device / fallback / CPU shares of calls and of time; host bookkeeping (optimizer step counters) is no
    finding, so it is out of both wholes, as in every share."""
    def parts(values) -> tuple:
        whole = sum(value for _, value in values)
        return tuple(VerdictShare(verdict, float(value) / whole) for verdict, value in values if value) if whole else ()

    return VerdictSplit(
        # a refused call was sent to the device and never ran there: a part of its own, else the parts would not sum
        calls=parts(((DEVICE, head.device_calls), (REFUSED, head.refused_calls), (FALLBACK, head.fallback_calls),
                     (CPU, head.cpu_calls))),
        time=parts(((DEVICE, head.device_op_time_ms), (FALLBACK, head.fallback_time_ms), (CPU, head.cpu_time_ms))))


def _timeline(ops) -> Optional[Timeline]:
    calls = timeline(ops)
    if calls.empty:
        return None
    columns = {name: tuple(calls[name].tolist()) for name in calls.columns}
    steps = tuple(StepSpan(int(r.step), int(r.start_ns), int(r.end_ns), int(r.calls))
                  for r in step_spans(calls).itertuples())
    return Timeline(lanes=LANES, steps=steps, **columns)


#: sessions whose calls stand for torch-directml's, which runs on torch 2.4.1 only
_DIRECTML_STAND_INS = ("emulated-dml",)


def _drift(run: RunMeta, ops) -> Optional[list]:
    """For a prediction or an emulated DirectML scan: the ops of its step whose presence differs on torch 2.4.1
    (None for other sessions)."""
    if run.kind == SWEEP or not _directml_stand_in(run):
        return None  # a target read from another torch's wheel is not torch-directml's (docs/targets.md)
    version = run.environment.torch_version or ""
    if not version:
        return None
    names = set(ops["op"]) | {op for text in ops.loc[ops["fallback_ops"] != "", "fallback_ops"]
                              for op in parse_fallback_ops(text)}
    return path_drift(names, version)


def _directml_stand_in(run: RunMeta) -> bool:
    """A prediction for DirectML, or a scan on the emulated DirectML device: calls that stand for
    torch-directml's, with no real adapter's times."""
    return (run.is_prediction and run.prediction is not None and run.prediction.target == "dml") or (
        run.device.backend in _DIRECTML_STAND_INS)


def _torch_paths(run: RunMeta, ops) -> Optional[TorchPaths]:
    """For a prediction or an emulated DirectML scan: the torch whose paths it took, and where 2.4.1's differ."""
    drift = _drift(run, ops)
    if drift is None:
        return None
    differing = tuple(d.describe() for d in drift)
    return TorchPaths(path_note(run.environment.torch_version, differs=bool(differing)), differing)


def _torch_only(run: RunMeta, ops) -> Mapping[str, str]:
    """Op -> why, for the ops that only the torch this ran on reaches (DirectML users' torch 2.4.1 does not)."""
    return {d.op: f"{d.describe()}; DirectML users, on torch {BASELINE_TORCH}, do not meet this fallback"
            for d in _drift(run, ops) or ()}


#: backends whose calls are torch-directml's (live, emulated), besides a prediction for target dml
_DIRECTML_BACKENDS = ("dml", "emulated-dml")


def _known_wrong_results(run: RunMeta, ops) -> tuple:
    """Device calls in a class of calls whose results are wrong on real DirectML (dmlprof.report.known_wrong)."""
    directml = run.device.backend in _DIRECTML_BACKENDS or (run.prediction is not None
                                                              and run.prediction.target == "dml")
    if not directml or run.kind == SWEEP or ops.empty:
        return ()
    return known_wrong_results(ops, load_measured("dml"))


def _host_rows(frame) -> tuple:
    return tuple(HostCallRow(str(r.op), int(r.calls), float(r.time_ms), _texts(r.phases), _texts(r.modules),
                             _texts(r.sources)) for r in frame.itertuples())


def _texts(values) -> tuple:
    return tuple(str(v) for v in values)


def _hotspots(frame, guessed_ops: set, torch_only: Mapping[str, str]) -> tuple:
    """The hotspots, those that only this torch reaches after the others (they are not the users' findings)."""
    hotspots = [_hotspot(r, guessed_ops, torch_only) for r in frame.itertuples()]
    return tuple(sorted(hotspots, key=lambda h: h.torch_flag is not None))


def _hotspot(r, guessed_ops: set, torch_only: Mapping[str, str]) -> Hotspot:
    inner = _texts(r.inner_ops)
    fixes = tuple(Fix(op, tip) for op in (inner or (str(r.op),)) for tip in [advice_for(op, str(r.op), _texts(r.phases))] if tip)
    flags = [torch_only[op] for op in (str(r.op),) + inner if op in torch_only]
    return Hotspot(
        op=str(r.op), inner_ops=inner, calls=int(r.calls), inner_calls=int(r.inner_calls), time_ms=float(r.time_ms),
        share=float(r.share), bytes_moved=int(r.bytes_moved), phases=_texts(r.phases), modules=_texts(r.modules),
        sources=_texts(r.sources), replacement=fixes[0].advice if fixes else None, fixes=fixes,
        guessed=str(r.op) in guessed_ops, torch_flag=flags[0] if flags else None)


def _op_row(r, guessed_rows: set) -> OpRow:
    return OpRow(
        op=str(r.op), verdict=str(r.verdict), phase=str(r.phase), calls=int(r.calls), time_ms=float(r.time_ms),
        device_time_ms=None if pd.isna(r.device_time_ms) else float(r.device_time_ms), share=float(r.share),
        bytes_moved=int(r.bytes_moved), fallback_ops=tuple(sorted(parse_fallback_ops(r.fallback_ops))),
        module=str(r.module), source=str(r.source), guessed=(str(r.op), str(r.verdict), str(r.phase)) in guessed_rows)


def _transfer(r) -> TransferRow:
    return TransferRow(str(r.op), str(r.transfer), int(r.calls), int(r.bytes_moved), float(r.time_ms),
                       _texts(r.phases), _texts(r.modules), _texts(r.sources))


# -- what other commands attached ---------------------------------------------------------------
def _verification(raw) -> Optional[Verification]:
    found = verification_summary(raw)
    if found is None:
        return None
    return Verification(
        clean=found["clean"], headline=found["headline"], checked_calls=found["checked_calls"],
        checked_ops=found["checked_ops"], divergent_calls=found["divergent_calls"],
        divergent_ops=tuple(_divergent(r) for r in found["divergent_ops"]),
        lost_updates=tuple(LostUpdate(str(r["parameter"]), str(r["optimizer"]), int(r["steps"]), _shape(r["shape"]),
                                      str(r["dtype"]), float(r["max_abs_grad"]), r["lr"]) for r in found["lost_updates"]),
        optimizer_steps=found["optimizer_steps"], parameters_checked=found["parameters_checked"],
        skipped_calls=found["skipped_calls"],
        skipped=tuple(Unchecked(str(s["reason"]), int(s["calls"]), _texts(s["ops"])) for s in found["skipped"]),
        tolerances=dict(found["tolerances"]), notes=tuple(found["notes"]))


def _divergent(r: dict) -> DivergentOp:
    return DivergentOp(
        op=str(r["op"]), module=str(r["module"]), source=str(r["source"]), what=str(r["what"]), calls=int(r["calls"]),
        reason=str(r["reason"]), max_abs_error=r["max_abs_error"], max_rel_error=r["max_rel_error"],
        phase=str(r["phase"]), first_step=r["first_step"], input_shapes=tuple(_shape(s) for s in r["input_shapes"]),
        input_dtypes=_texts(r["input_dtypes"]), output_shape=_shape(r["output_shape"]),
        output_dtype=str(r["output_dtype"]), mismatched=r["mismatched"], numel=r["numel"], rtol=r["rtol"],
        atol=r["atol"])


def _shape(values) -> tuple:
    return tuple(int(n) for n in values or ())


def _replace(raw) -> Optional[ReplaceComparison]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("before"), Mapping) or not isinstance(raw.get("after"), Mapping):
        return None
    try:
        speedup = raw.get("step_time_speedup")
        return ReplaceComparison(
            before=_replace_side(raw["before"]), after=_replace_side(raw["after"]),
            fallback_calls_removed=int(raw.get("fallback_calls_removed") or 0),
            step_time_speedup=float(speedup) if isinstance(speedup, (int, float)) and speedup else None,
            removed_ops=_texts(raw.get("removed_ops") or ()),
            remaining_ops=tuple(RemainingOp(str(r.get("op", "")), int(r.get("calls", 0) or 0), r.get("replacement"))
                                for r in raw.get("remaining_ops") or () if isinstance(r, Mapping)),
            applied=tuple(a for a in raw.get("applied") or () if isinstance(a, Mapping)))
    except (TypeError, ValueError):
        return None


def _replace_side(side: Mapping) -> ReplaceSide:
    step = side.get("step_time_ms")
    ops = side.get("fallback_ops")
    return ReplaceSide(
        steps=int(side.get("steps") or 1), fallback_calls=int(side.get("fallback_calls") or 0),
        fallback_calls_per_step=float(side.get("fallback_calls_per_step") or 0.0),
        fallback_time_share=float(side.get("fallback_time_share") or 0.0),
        fallback_bytes_moved_per_step=float(side.get("fallback_bytes_moved_per_step") or 0.0),
        step_time_ms=None if step is None else float(step),
        fallback_ops=dict(ops) if isinstance(ops, Mapping) else {},
        error=str(side["error"]) if side.get("error") else None,
        inner_fallback_calls=int(side["inner_fallback_calls"]) if "inner_fallback_calls" in side else None)


def _sweep(raw, run: RunMeta) -> Optional[SweepReport]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("rows"), list):
        return None
    try:
        frame = sweep_frame(raw["rows"])
    except (KeyError, TypeError, ValueError):
        return None
    budget = raw.get("memory_budget_bytes")
    budget = int(budget) if isinstance(budget, (int, float)) and not isinstance(budget, bool) and budget > 0 else None
    recommended, knee = raw.get("recommended_batch_size"), raw.get("knee_batch_size")
    fits = fits_budget(frame, budget)
    growth = growth_per_doubling(frame).set_index("batch_size")["growth_per_doubling"]
    rows = tuple(_sweep_row(record, bool(fits[i]), growth, recommended, knee)
                 for i, record in zip(frame.index, frame.to_dict(orient="records")))
    details = run.sweep.details if run.sweep else ()
    # a backend that cannot fall back (the CPU) records no fallback time: it is unknown, not 0 %
    # what the sizes that ran say (a size that failed recorded nothing, whatever the backend): True, some
    # recorded a step for fallbacks; False, the backend cannot fall back (the CPU); None, none said
    ran = {row.batch_size for row in rows if row.ok}
    flags = [d["fallback_recorded"] for d in details
             if d.get("batch_size") in ran and isinstance(d.get("fallback_recorded"), bool)]
    fallback_recorded = any(flags) if flags else None
    rows = tuple(replace(row, fallback_time_share=None) for row in rows) if fallback_recorded is False else rows
    return SweepReport(
        rows=rows, recommended_batch_size=recommended, knee_batch_size=knee, memory_budget_bytes=budget,
        knee_min_growth=KNEE_MIN_GROWTH, noisy_p95_over_p50=NOISY_P95_OVER_P50,
        fallback_ops=tuple(sorted({str(op) for d in details for op in (d.get("fallback_ops") or ())})),
        fallback_recorded=fallback_recorded,
        memory_sources=tuple(sorted({row.memory_source for row in rows if row.memory_source})))


def _sweep_row(record: dict, fits: bool, growth, recommended, knee) -> SweepRow:
    ok = record["status"] == "ok"
    peak = record["peak_memory_bytes"]
    grown = growth.get(record["batch_size"]) if ok else None
    return SweepRow(
        batch_size=int(record["batch_size"]), status=str(record["status"]),
        samples_per_s=float(record["samples_per_s"]), step_ms_p50=float(record["step_ms_p50"]),
        step_ms_p95=float(record["step_ms_p95"]), peak_memory_bytes=None if pd.isna(peak) else int(peak),
        memory_source=str(record["memory_source"] or ""), fallback_time_share=float(record["fallback_time_share"]),
        error=None if record["error"] is None or pd.isna(record["error"]) else str(record["error"]),
        growth_per_doubling=None if grown is None or pd.isna(grown) else float(grown),
        fits_budget=fits, noisy=ok and record["step_ms_p95"] > NOISY_P95_OVER_P50 * record["step_ms_p50"],
        recommended=record["batch_size"] == recommended, knee=record["batch_size"] == knee)
