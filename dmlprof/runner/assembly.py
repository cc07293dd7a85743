"""Session assembly: what a recording holds (the recorder's calls, torch.profiler's events, the
run's facts) made into a :class:`~dmlprof.session.Session`, once, for every kind of run.

The contract run, the script run and ``dmlprof.profile`` finish through :func:`assemble`; the op
frame itself is the recorder's (:meth:`~dmlprof.record.recorder.Recorder.frame`), which the sweep's
child and a stuck rank's snapshot read too. ``facts`` is the run's :class:`~dmlprof.facts.RunFacts`,
filled in here with what the recording says.
"""
from __future__ import annotations

import bisect
from collections import Counter
from typing import Optional

import torch

from dmlprof.backends import Backend
from dmlprof.facts import RunFacts
from dmlprof.meta import DeviceFailure, DeviceTimeCheck, Guess, Memory, NonfiniteLoss, ProfilerCheck, WarningRecord
from dmlprof.distributed.annotate import annotate as annotate_distributed
from dmlprof.record.profiler import ProfilerAlongside, join_call_events, profiler_op_totals
from dmlprof.record.recorder import Recorder
from dmlprof.session import Session
from dmlprof.units import fmt_bytes


def assemble(recorder: Recorder, profiler: Optional[ProfilerAlongside], backend: Backend, facts: RunFacts, *,
             losses: list, step_times_ms: list, verifier=None, raised: Optional[BaseException] = None,
             interrupted: bool = False, ops=None, events=None, went_on: bool = False) -> Session:
    """The Session of a recording. ``ops``/``events`` are given when the steps were timed by the
    profiler alone (steady state); otherwise the recorder's calls are joined to the profiler's events
    here. ``raised`` is what stopped a partial run (its failing call is named); after Ctrl-C
    (``interrupted``) the profiler's events are not read: that is most of a long run's saving time. ``went_on``:
    the code caught the device's error in place of a call that ends DirectML's process and ran on (the
    emulated device), so the failing call is the run's finding though the run did not stop there."""
    if ops is None:
        ops = recorder.frame()
        if recorder.device_lost_row is not None:
            _note_lost_device(ops, recorder.device_lost_row, facts)
        elif recorder.failed_row is not None and (facts.partial or went_on):
            after = len(ops) - recorder.failed_row - 1 if went_on else None
            _note_failed_call(ops.iloc[recorder.failed_row], backend, facts, raised, calls_after=after)
        if interrupted and profiler is not None and profiler.profile is not None:
            facts.note("interrupted: torch.profiler's events were not read, so there is no cross-check of the times")
        elif profiler is not None and profiler.profile is not None:
            events = profiler.op_events()
            ops = join_call_events(ops, events, device_times=backend.profiler_device_activity)
    _check_losses(losses, backend, facts)
    profiler_ops = profiler_op_totals(events) if events is not None else None
    if facts.recording.structure_step:  # the times are the profiler's own: nothing to cross-check
        profiler_ops = None
        facts.set_recording(profiler_check=ProfilerCheck(note="measured steps were timed by torch.profiler itself"))
    memory = safe(backend.memory, None)
    facts.set(
        step_times_ms=[round(t, 3) for t in step_times_ms],
        memory=Memory(**vars(memory)) if memory is not None else Memory(),
        warnings=_other_warnings(recorder, backend),
        module_classes=recorder.modules.classes(),
    )
    seen = ops.iloc[:profiler.covered_calls] if profiler is not None and profiler.covered_calls is not None else ops
    if profiler_ops is not None:
        facts.set_recording(profiler_check=_profiler_check(seen, profiler_ops, synced=bool(facts.recording.sync)))
    if events is not None and backend.profiler_device_activity:
        facts.set_recording(device_time_check=_device_time_check(seen, events))
    facts.note(*_recording_notes(recorder, profiler))
    if backend.predicted:
        ops = _predicted_frame(ops, backend, facts, recorder.rows)
    session = Session(meta=facts.build(), ops=ops)
    # in a launched job: rank metadata, per-collective times, torch.profiler's own trace of this rank
    annotate_distributed(session, events, profiler)
    if verifier is not None:
        session.verify = verifier.result(partial=bool(facts.partial))
    if profiler_ops is not None:
        session.profiler_ops = profiler_ops
    return session


def _note_failed_call(failed, backend: Backend, facts: RunFacts, raised: Optional[BaseException], *,
                      calls_after: Optional[int] = None) -> None:
    """The call a partial run stopped in, with the user's line and the module that made it; first the
    device's refusal, when it was one (DirectML raises or would end the process)."""
    facts.set(failed_op=failed["op"], failed_source=failed["source"], failed_module=failed["module"] or None)
    on_device = backend.device_type in failed["input_devices"] + failed["output_devices"]
    found = backend.failure_in(raised, on_device) if raised is not None else None
    if found is None:  # the user's code failed: not the device's refusal
        return
    known = backend.known_error(raised)
    facts.set(device_failure=DeviceFailure(
        op=failed["op"], kind=found.kind, message=found.message, dtypes=failed["dtypes"] or "",
        source=failed["source"] or "", explanation=known.explanation if known else "",
        remedy=known.remedy if known else "", observed=not backend.predicted, calls_after=calls_after))


def _note_lost_device(ops, row: int, facts: RunFacts) -> None:
    """The call in which the device was lost is the run's one failure: every call after it fails too (or
    returns values nobody can trust), and none of those is its own op's fault."""
    from dmlprof.backends.errors import KNOWN_ERRORS

    lost = ops.iloc[row]
    known = next(error for error in KNOWN_ERRORS if error.key == "dml_device_removed")
    facts.set(failed_op=lost["op"], failed_source=lost["source"], failed_module=lost["module"] or None)
    facts.set(device_failure=DeviceFailure(
        op=lost["op"], kind="raises", message="the device was lost (DXGI_ERROR_DEVICE_REMOVED)",
        dtypes=lost["dtypes"] or "", source=lost["source"] or "", explanation=known.explanation,
        remedy=known.remedy, observed=True))
    after = len(ops) - row - 1
    if after:
        facts.note(f"the device was lost in call {row + 1} ({lost['op']}): the {after:,} calls after it ran on a lost "
                   "device; their results and failures are void, not their ops' doing")
    if not facts.recording.sync:
        facts.note("--no-sync: the device runs calls after Python returns from them, so it was lost in this call or "
                   "one shortly before it; the default per-call sync names the call itself")


def _check_losses(losses: list, backend: Backend, facts: RunFacts) -> None:
    """Note the first step whose loss was NaN or infinite (after recording: the check reads the device)."""
    if backend.predicted:
        return  # a prediction's values are stand-ins, and reading them would count as calls
    for number, loss in enumerate(losses, start=1):
        try:
            # on the CPU: isfinite may fall back on the device, and its warning is not the model's
            value = loss.detach().to("cpu", torch.float32)
            finite = bool(torch.isfinite(value).all())
        except Exception:  # a loss the device cannot check is not ours to judge
            continue
        if not finite:
            value = value.item() if value.numel() == 1 else "nan or inf"
            facts.set(nonfinite_loss=NonfiniteLoss(step=number, steps_run=len(losses), value=str(value)))
            return


def _recording_notes(recorder: Recorder, profiler: Optional[ProfilerAlongside]) -> list:
    """What a bounded recording left out, in words (dmlprof.record.recorder.MAX_RECORDED_CALLS,
    dmlprof.record.profiler.PROFILED_CALLS_MAX)."""
    notes = []
    if recorder.full:
        notes.append(f"the recording holds the first {recorder.filled_at[-1]:,} calls, its most ({recorder.max_calls:,} "
                     f"calls or {fmt_bytes(recorder.max_bytes)} of their records, whichever comes first: about 600 "
                     "bytes a call and 180 a tensor until saved); the calls after them ran unrecorded")
    if profiler is not None and profiler.note():
        notes.append(profiler.note())
    return notes


PLACEHOLDER_NOTE = ("these ops read values the prediction did not have (beyond its budget for real values, or "
                    "from tensors made on the meta device) and made them up: a value read back, or an output sized "
                    "by the data; the calls after the first may differ from a real run (the report marks them)")


def _predicted_frame(ops, backend: Backend, facts: RunFacts, rows: list):
    """A prediction has calls, not times: the host time spent predicting is nobody's cost."""
    ops = ops.copy()
    ops["evidence"] = backend.fallback_evidence  # every verdict rests on the table's registrations
    ops["time_ns"] = 0
    ops["start_ns"] = 0
    placeholders = backend.placeholder_ops()
    facts.set(step_times_ms=(), memory=Memory())
    facts.set_prediction(placeholder_ops=placeholders)
    guess = backend.first_guess()
    if guess is not None:
        first_seq = _first_call_after(rows, guess.time_ns)
        during = bool(rows) and rows[first_seq][5] <= guess.time_ns  # made up inside that call, not before it
        facts.set_prediction(guess=Guess(first_seq=first_seq, op=guess.op, why=guess.why,
                                         source=rows[first_seq][10] if during else ""))
    if placeholders:
        facts.note(PLACEHOLDER_NOTE)
    return ops


def _first_call_after(rows: list, time_ns: int) -> int:
    """The first recorded call that may follow a value made up at ``time_ns``: the call that was running
    then (a value is made up inside a call), or the first call when it came before every recorded one."""
    starts = [row[5] for row in rows]
    return max(bisect.bisect_right(starts, time_ns) - 1, 0)



def _profiler_check(ops, profiler_ops, synced: bool = False) -> ProfilerCheck:
    """Totals over the ops both we and torch.profiler timed."""
    from dmlprof.analysis import profiler_crosscheck

    both = profiler_crosscheck(ops, profiler_ops).dropna(subset=["profiler_time_ms"])
    ours, theirs = float(both["time_ms"].sum()), float(both["profiler_time_ms"].sum())
    return ProfilerCheck(
        matched_ops=int(len(both)), time_ms=round(ours, 3), profiler_time_ms=round(theirs, 3),
        ratio=round(ours / theirs, 4) if theirs else None,
        note=("per-op sync: our times include waiting for the device after each call; "
              "the profiler's host ranges end when the call returns") if synced else None)


def _device_time_check(ops, events) -> DeviceTimeCheck:
    """Kernel time joined to our calls against all kernel time the profiler saw."""
    ours = float(ops["device_time_ns"].fillna(0).sum()) / 1e6
    theirs = float(events["self_device_time_ns"].sum()) / 1e6
    return DeviceTimeCheck(calls_device_time_ms=round(ours, 3), profiler_kernel_time_ms=round(theirs, 3),
                           ratio=round(ours / theirs, 4) if theirs else None)


def _other_warnings(recorder: Recorder, backend: Backend) -> list:
    """Warnings that are not fallback evidence, once each with a count."""
    counts = Counter(
        (category, message)
        for message, category in zip(recorder.warnings.messages, recorder.warnings.categories)
        if backend.fallback_ops_in(message) is None
    )
    return [WarningRecord(category=c, message=m[:500], count=n) for (c, m), n in counts.most_common(50)]


def safe(fn, default):
    try:
        return fn()
    except Exception:
        return default

