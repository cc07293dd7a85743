"""Which device calls of a run fall in a class of calls whose results are wrong on DirectML.

Each device call of the op frame is matched, by its op, dtypes, input shapes, phase (and scalar arguments
where the recording kept them), against the measured table's flagged entries and the classes of
:mod:`dmlprof.tables.wrong_classes`: a call is flagged only where it is in the class the wrong samples were
measured for. A class that loses gradients says which modules' parameters it zeroes.
"""
from __future__ import annotations

import json
from typing import Optional

from dmlprof.tables.wrong_classes import (
    MASKED_BACKWARD_FORWARD_OPS, call_of, classes_for, modules_below, table_entry_applies,
)
from dmlprof.replacements.catalog import advice_for_wrong_results
from dmlprof.report.model import KnownWrongResults
from dmlprof.schema import DEVICE, FALLBACK

#: what to do instead of a reduction whose backward loses gradients
ZEROED_GRADIENTS_FIX = ("pool with torch.max(x, dim=x.dim() - 1).values (a non-negative dim: its backward scatters "
                        "the gradient by index instead of multiplying by a bool mask); confirm it on real DirectML "
                        "(scan --device dml --verify, or scan --target dml --confirm where realdml runs): the "
                        "emulated device computes with the CPU's kernels, and its --verify cannot see this value")


def _arguments(row) -> Optional[dict]:
    text = getattr(row, "arguments", None)
    if not isinstance(text, str) or not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def known_wrong_results(ops, table) -> tuple:
    """KnownWrongResults of the run's device calls (``ops``: the op frame; ``table``: the measured table or
    None), the ones that break training first, then confirmed ones, then by calls."""
    if ops.empty:
        return ()
    groups = _flagged_groups(ops, table)
    results = [_result(ops, key, rows, table) for key, rows in groups.items()]
    return tuple(sorted(results, key=lambda k: (not k.breaks_training, not k.confirmed, -k.calls)))


def wrong_seqs(ops, table) -> dict:
    """``seq`` -> the class in words, for every device call flagged as a known wrong result (what ``scan
    --confirm`` holds against real torch-directml, call by call). A class whose calls give right values alone
    (``wrong_in_replay`` False: the wrong values come later, from autograd) is not held against a replay."""
    if ops.empty:
        return {}
    found: dict = {}
    for (_, _, source, what), rows in _flagged_groups(ops, table).items():
        if source == "class" and (not what.wrong_in_replay or what.unjudged):
            continue
        words = what.klass if source == "class" else (what or "the measured table's wrong samples")
        for row in rows:
            found.setdefault(int(row.seq), words)
    return found


def _flagged_groups(ops, table) -> dict:
    """(op, dtypes, "table"|"class", what) -> the device calls (rows) it flags. A call that fell back ran its
    kernel on the CPU, right; but a class whose wrong values come later, from autograd's use of the call on the
    device (``wrong_in_replay`` False: an in-place write into a device view, whose CopySlices misplaces the
    gradient whoever wrote it: ``index_copy_`` falls back, re-probe 14 case 21), holds for it as well."""
    device = ops[ops["verdict"].isin((DEVICE, FALLBACK))]
    groups: dict = {}
    for row in device.itertuples():
        op, dtypes, fell_back = str(row.op), str(row.dtypes), row.verdict == FALLBACK
        call = call_of(op, dtypes, str(row.shapes), str(row.phase), _arguments(row))
        wrong = table.wrong_results(op, dtypes) if table is not None and not fell_back else None
        if wrong is not None:
            applies, words = table_entry_applies(wrong.op, table.entry(op, dtypes) or {}, call)
            if applies:
                groups.setdefault((op, dtypes, "table", words), []).append(row)
        for found in classes_for(call):
            if not fell_back or not found.wrong_in_replay:
                groups.setdefault((op, dtypes, "class", found), []).append(row)
    classed = {(op, dtypes): {r.seq for r in rows} for (op, dtypes, source, _), rows in groups.items()
               if source == "class"}
    # a table entry whose calls a measured class already names (with what it breaks) is said once, by the class
    return {key: rows for key, rows in groups.items()
            if key[2] == "class" or not {r.seq for r in rows} <= classed.get(key[:2], set())}


def _texts(values) -> tuple:
    seen = []
    for value in values:
        text = str(value)
        if text and text not in seen:
            seen.append(text)
    return tuple(seen)


def _result(ops, key, rows, table) -> KnownWrongResults:
    op, dtypes, source, what = key
    sources, modules = _texts(r.source for r in rows), _texts(r.module for r in rows)
    if source == "table":
        wrong = table.wrong_results(op, dtypes)
        return KnownWrongResults(op, len(rows), wrong.dtype, wrong.wrong_calls, wrong.calls, wrong.max_abs_error,
                                 wrong.max_rel_error, wrong.confirmed_by, sources, modules,
                                 advice_for_wrong_results(op), wrong.reason, klass=what)
    consequence = what.consequence
    if what.zeroes_gradients:
        culprit_sources, consequence = _zeroed_gradients(ops, rows)
        sources = culprit_sources or sources
    return KnownWrongResults(op, len(rows), dtypes, 0, 0, None, None, what.confirmed_by, sources, modules,
                             ZEROED_GRADIENTS_FIX if what.zeroes_gradients else what.fix, what.reason,
                             klass=what.klass,
                             consequence=consequence, breaks_training=what.zeroes_gradients, unjudged=what.unjudged)


def _zeroed_gradients(ops, rows) -> tuple:
    """(the culprit's forward source lines, "gradients of every parameter below M ... are zero") for backward
    calls that zero the gradients flowing through them."""
    module = str(rows[0].module)
    forward = ops[ops["phase"] == "forward"]
    culprits = forward[forward["op"].isin(MASKED_BACKWARD_FORWARD_OPS) & (forward["module"] == module)]
    if culprits.empty:
        culprits = forward[forward["op"].isin(MASKED_BACKWARD_FORWARD_OPS)]
    first_seq = int(culprits["seq"].min()) if not culprits.empty else None
    earlier = forward[forward["seq"] < first_seq]["module"].tolist() if first_seq is not None else []
    below = modules_below([str(m) for m in earlier], module)
    culprit_op = str(culprits["op"].iloc[0]).replace("aten::", "") if not culprits.empty else "a masked reduction"
    where = f"`{module}`" if module else "the model"
    listed = ", ".join(below[:6]) + (f" and {len(below) - 6} more" if len(below) > 6 else "")
    text = (f"gradients of every parameter below {where} ({len(below)} module{'s' if len(below) != 1 else ''}: "
            f"{listed}) are zero on DirectML: the backward of {culprit_op} comes back bool, so training is broken"
            if below else f"every gradient flowing back through {culprit_op} in {where} is zero on DirectML: "
                          "training is broken")
    sources = _texts(culprits["source"]) if not culprits.empty else ()
    return tuple(s for s in sources if s and ":" in s), text
