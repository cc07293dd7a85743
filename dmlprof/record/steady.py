"""Steady-state recording: one step through the dispatcher, the rest through torch.profiler.

A Python dispatch mode costs tens of microseconds per op call, which doubles a
launch-bound GPU step. A training step repeats itself, so with ``--no-sync``
dmlprof records one *structure step* call by call (op overloads, devices,
modules, source lines, fallback evidence) and times the measured steps with
torch.profiler alone, which already runs alongside. Each measured step's
profiler events are aligned with the structure step's calls by op name; a step
that differs too much is not guessed at, it is reported as unmatched. Each measured step's fallback warnings (still raised on every
call) are counted and checked against the structure step's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Optional

import pandas as pd

from dmlprof.schema import parse_fallback_ops
from dmlprof.record.profiler import MODE_RANGE, OWN_RANGE_PREFIX, inner_call_mask

STEP_RANGE = OWN_RANGE_PREFIX + "step#"
# Below this share of the structure step's calls found again, a measured step
# is too different to be described by it and is left out (and reported).
MIN_MATCHED_SHARE = 0.9
# Ranges and runtime calls that are not op calls, or that vary from step to
# step (allocator calls): the matching only looks at dispatcher ops.
_IGNORED_PREFIXES = (OWN_RANGE_PREFIX, "autograd::", "profiler::", "ProfilerStep")


def step_windows(events: pd.DataFrame) -> dict:
    """{step: (start_ns, end_ns)}: from one ``dmlprof::step#N`` range's start to the next one's.

    Not the range's own end: work the step hands to another thread (autograd's
    device threads run backward) is not always inside it on the timeline.
    """
    ranges = events[events["name"].str.startswith(STEP_RANGE)].sort_values("start_ns")
    starts = [int(start) for start in ranges["start_ns"]]
    ends = starts[1:] + [int((events["start_ns"] + events["time_ns"]).max()) + 1]
    return {int(name[len(STEP_RANGE):]): (start, end) for name, start, end in zip(ranges["name"], starts, ends)}


def _op_events_in(events: pd.DataFrame, window) -> pd.DataFrame:
    start, end = window
    inside = events[(events["start_ns"] >= start) & (events["start_ns"] < end)]
    is_op = inside["name"].str.contains("::", regex=False) & ~inside["name"].str.startswith(_IGNORED_PREFIXES)
    is_op |= inside["name"] == MODE_RANGE
    # Outer events start first; at equal starts the longer (enclosing) one first.
    ordered = inside[is_op].assign(_neg=-inside["time_ns"]).sort_values(["start_ns", "_neg"], kind="stable")
    return ordered.drop(columns="_neg").reset_index(drop=True)


def collapse(events: pd.DataFrame) -> tuple:
    """Drop what our dispatch mode adds to a trace; return (kept events, which of them are our calls).

    Under the mode each recorded call shows as an outer event, (torch >= 2.5)
    a ``PythonDispatchMode`` range, then an inner event of the same name: the
    inner duplicate and the range go, the outer event is marked as a call.
    """
    kept_rows, is_call = [], []
    inner_mask = inner_call_mask(events) if len(events) else []
    for row, inner in zip(events.itertuples(index=False), inner_mask):
        if row.name == MODE_RANGE:
            continue
        if inner:
            for back in range(len(kept_rows) - 1, -1, -1):
                if kept_rows[back].name == row.name:
                    is_call[back] = True
                    break
            continue
        kept_rows.append(row)
        is_call.append(False)
    kept = pd.DataFrame(kept_rows, columns=events.columns) if kept_rows else events.iloc[0:0]
    return kept.reset_index(drop=True), is_call


@dataclass
class Structure:
    """The structure step: its op frame and where each call sits in its trace."""

    template: pd.DataFrame  # op frame of the structure step
    names: list  # op event names of the collapsed trace, in order
    call_positions: list  # position in ``names`` of each observed template row
    observed: list  # per template row: does the profiler record this op at all?
    fallback_counts: Counter  # inner fallback op -> calls, per step
    unobserved_names: frozenset  # ops the profiler does not record in a plain step

    @classmethod
    def from_template(cls, template: pd.DataFrame, events: pd.DataFrame) -> Optional["Structure"]:
        """None when the trace and the recorded calls do not line up one to one."""
        windows = step_windows(events)
        if len(windows) != 1 or template.empty:
            return None
        kept, is_call = collapse(_op_events_in(events, next(iter(windows.values()))))
        positions = [i for i, flag in enumerate(is_call) if flag]
        call_names = [kept["name"].iat[i] for i in positions]
        # The profiler records no range for a few ops (aten::detach among
        # them); such calls keep the structure step's own timing.
        observed, cursor = [], 0
        for op in template["op"]:
            name = op.split(".", 1)[0]
            hit = cursor < len(call_names) and call_names[cursor] == name
            observed.append(hit)
            cursor += hit
        unobserved_names = {op.split(".", 1)[0] for op, hit in zip(template["op"], observed) if not hit}
        if cursor != len(call_names) or unobserved_names & set(call_names):
            return None
        # Under the mode such ops can still leave an event; plain steps leave none.
        keep = ~kept["name"].isin(unobserved_names)
        is_call = [flag for flag, k in zip(is_call, keep) if k]
        kept = kept[keep].reset_index(drop=True)
        positions = [i for i, flag in enumerate(is_call) if flag]
        counts: Counter = Counter()
        for text in template.loc[template["verdict"] == "fallback", "fallback_ops"]:
            counts.update(parse_fallback_ops(text))
        return cls(template, list(kept["name"]), positions, observed, counts, frozenset(unobserved_names))

    def apply(self, events: pd.DataFrame, window, step: int, origin_ns: int) -> Optional[pd.DataFrame]:
        """The op frame of one measured step, or None if its trace is too unlike the structure's.

        The two traces are aligned as sequences of op names. They are rarely
        identical: recording itself changes a few calls (autograd accumulates
        a gradient in place only when nothing else holds the tensor, and the
        recorder does). Calls that align take the measured step's own times;
        the few that do not keep the structure step's timing and are counted
        in the frame's ``attrs["unmatched_calls"]``.
        """
        kept, _ = collapse(_op_events_in(events, window))
        kept = kept[~kept["name"].isin(self.unobserved_names)].reset_index(drop=True)
        step_names = list(kept["name"])
        if step_names == self.names:
            to_step = {position: position for position in self.call_positions}
        else:
            matcher = SequenceMatcher(None, self.names, step_names, autojunk=False)
            to_step = {}
            for tag, i1, i2, j1, _ in matcher.get_opcodes():
                if tag == "equal":
                    to_step.update((i1 + k, j1 + k) for k in range(i2 - i1))
        rows = len(self.template)
        observed_rows = [row for row, hit in enumerate(self.observed) if hit]
        matched_rows, matched_events = [], []
        for row, position in zip(observed_rows, self.call_positions):
            if position in to_step:
                matched_rows.append(row)
                matched_events.append(to_step[position])
        if len(matched_rows) < MIN_MATCHED_SHARE * len(observed_rows):
            return None
        picked = kept.iloc[matched_events]
        frame = self.template.copy()
        frame["step"] = step
        matched = pd.Series(False, index=frame.index)
        matched.iloc[matched_rows] = True
        frame.loc[matched, "start_ns"] = picked["start_ns"].to_numpy() - origin_ns
        frame.loc[matched, "time_ns"] = picked["time_ns"].to_numpy()
        device = pd.array([None] * rows, dtype="Float64")
        device[matched.to_numpy()] = picked["device_time_ns"].to_numpy()
        frame["device_time_ns"] = device
        ranges = [()] * rows
        for row, around in zip(matched_rows, picked["ranges"] if "ranges" in picked else ()):
            ranges[row] = around
        # (name, start_ns) pairs: numbered once the steps are together (numbered_ranges); a call not found
        # again keeps no range
        frame["ranges"] = ranges
        # Calls without their own event sit just after the call before them.
        frame["start_ns"] = frame["start_ns"].where(matched).ffill().fillna(0).astype("int64")
        frame["evidence"] = frame["evidence"].map(_steady_evidence)
        frame.attrs["unmatched_calls"] = len(observed_rows) - len(matched_rows)
        return frame

    def fallbacks_match(self, fallback_names: list) -> bool:
        """Whether a measured step's fallback warnings equal the structure step's, op for op."""
        return Counter(fallback_names) == self.fallback_counts


def _steady_evidence(evidence: str) -> str:
    return f"{evidence} (structure step)" if evidence in ("fallback warning", "tensors") else evidence
