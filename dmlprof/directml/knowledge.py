"""Everything dmlprof knows of one op on DirectML, for ``dmlprof ops OP`` (issue 32, item 5).

The dispatcher's verdict (the op table) says where torch-directml registers an op; a scan also applies the
measured table (per dtype: on the device, fallen back, raised, ended the process, wrong), the failure rules
keyed by class (:mod:`dmlprof.directml.failures`, :mod:`dmlprof.directml.call_rules`) and the wrong-result
classes (:mod:`dmlprof.tables.wrong_classes`). Here all of them are gathered for the op and for the ops it
reaches: for a composite that decomposes above the backend, a small call built from its schema is traced on
the CPU, and each call it makes is judged by the rules as though the CPU were the device.
"""
from __future__ import annotations

from typing import Optional

import torch

#: the most sample calls tried when building one from a schema
_MAX_TRIES = 24


def _measured(table, op: str) -> list:
    """The measured table's entries of ``op`` (every dtype), with whether a scan flags each as wrong."""
    if table is None:
        return []
    found = []
    for dtypes, entry in sorted((table._ops.get(op) or {}).items()):
        verdicts = {k: int(entry.get(k) or 0) for k in ("device", "fallback", "raises", "aborts", "wrong")}
        flagged = table.wrong_results(op, dtypes) is not None
        found.append({"op": op, "dtypes": dtypes, "calls": int(entry.get("calls") or 0), **verdicts,
                      "flagged_wrong": flagged, "messages": list(entry.get("messages") or ())[:3],
                      "samples": list(entry.get("samples") or ())[:3]})
    return found


def _family(table, op: str) -> list:
    """``op`` and its overloads and backward in the measured table (upsample_bilinear2d.vec -> upsample_bilinear2d,
    upsample_bilinear2d_backward)."""
    if table is None:
        return []
    base = op.split(".", 1)[0]
    return sorted(name for name in table._ops if name.split(".", 1)[0] in (base, base + "_backward"))


def _rules(op: str) -> list:
    from dmlprof.directml.call_rules import rules_for
    from dmlprof.directml.failures import RULES

    found = [{"op": op, "kind": r.kind, "class": r.klass, "message": r.message, "evidence": r.evidence}
             for r in rules_for(op)]
    names = [name for name in RULES if name == op or name.split(".", 1)[0] == op]
    if names and not found:
        rule = RULES[names[0]]
        doc = (getattr(rule, "__doc__", None) or "").strip().split("\n\n")[0].replace("\n", " ")
        found.append({"op": names[0], "kind": "raises or aborts", "class": " ".join(doc.split()) or
                      "a class of calls measured on real torch-directml (dmlprof/directml/failures.py)",
                      "message": "", "evidence": "real torch-directml (tools/realdml)"})
    return found


def _wrong_classes(op: str) -> list:
    from dmlprof.tables.wrong_classes import ARGUMENT_CLASSES, UNREAD_ONLY, classes_of_op

    found = [{"op": op, "class": c.klass, "wrong": c.reason, "breaks": c.consequence, "evidence": c.evidence}
             for c in classes_of_op(op)]
    base = op.split(".", 1)[0]
    for name, why in UNREAD_ONLY.items():
        if name.split(".", 1)[0] == base:
            found.append({"op": name, "class": "none: not a wrong result", "wrong": why, "breaks": "",
                          "evidence": "realdml, rebuilt without dmlprof (issue 32)"})
    for name, (_, _, words) in ARGUMENT_CLASSES.items():
        if name.split(".", 1)[0] == base:
            found.append({"op": name, "class": words, "wrong": "the measured table's wrong samples", "breaks": "",
                          "evidence": "realdml (lavapipe), rechecked: ceil_mode=False right"})
    return found


def _sample_values(argument, attempt: int):
    """A value for one schema argument, the ``attempt``-th candidate."""
    kind = str(argument.type)
    if argument.has_default_value() and attempt % 2 == 0:
        return argument.default_value
    if "Tensor" in kind:
        tensors = (torch.randn(1, 2, 4, 4), torch.randint(0, 3, (4,)), torch.randn(3, 4), torch.randn(4))
        return tensors[(attempt // 2) % len(tensors)]
    if kind.startswith("bool"):
        return False
    if "int[" in kind.replace("SymInt", "int") or "int[]" in kind:
        return [2, 2]
    if "float[]" in kind:
        return [2.0, 2.0]
    if kind.startswith(("int", "SymInt")):
        return 1
    if kind.startswith("float"):
        return 1.0
    if "ScalarType" in kind:
        return torch.float32
    return None


def trace(op: str) -> list:
    """The aten calls a composite makes, from a small call built from its schema ([] where none runs):
    (name, args, kwargs) of each, on the CPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from dmlprof.record.tap import op_overload

    overload = op_overload(op)
    if overload is None:
        return []
    schema = overload._schema

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls.append((f"aten::{func._schema.name.split('::', 1)[-1]}"
                               + (f".{func._overloadname}" if func._overloadname != "default" else ""),
                               args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    for attempt in range(_MAX_TRIES):
        args, kwargs = [], {}
        for argument in schema.arguments:
            if argument.name == "out" or str(argument.type).endswith("(a!)"):
                continue
            value = _sample_values(argument, attempt)
            (kwargs.__setitem__(argument.name, value) if argument.kwarg_only else args.append(value))
        seen = Seen()
        try:
            with seen:
                overload(*args, **kwargs)
        except Exception:  # a sample the op refuses: try the next
            continue
        return seen.calls
    return []


def describe(op: str, dispatcher_kind: Optional[str], reaches: list) -> dict:
    """What dmlprof knows of ``op``: measured verdicts, failure rules and wrong-result classes, its own and those
    of the ops it reaches (the op table's ``reaches``, or a traced sample call), and what a scan would say."""
    from dmlprof.directml.failures import failure
    from dmlprof.tables.measured import load_measured

    table = load_measured("dml")
    reached = [step["op"] for step in reaches]
    judged = []
    for name, args, kwargs in trace(op) if dispatcher_kind is not None else ():
        if name not in reached and name != op:
            reached.append(name)
        found = failure(name, args, kwargs, "cpu")  # the CPU standing for the device: its calls judged as there
        if found is not None and all(j["op"] != name for j in judged):
            judged.append({"op": name, "kind": found.kind, "message": found.error_text()})
    own = [entry for family in _family(table, op) for entry in _measured(table, family)]
    # of the ops it reaches, only what is not plainly "on the device"
    others = [entry for name in reached for family in _family(table, name) for entry in _measured(table, family)
              if entry["fallback"] or entry["raises"] or entry["aborts"] or entry["flagged_wrong"]]
    unique = {(m["op"], m["dtypes"]): m for m in own + others}
    rules = [r for name in [op, *reached] for r in _rules(name)]
    wrong = [w for name in [op, *reached] for w in _wrong_classes(name)]
    return {"measured": list(unique.values()), "failure_rules": rules, "traced_failures": judged,
            "wrong_classes": wrong, "reached": reached, "scan_says": _scan_says(unique.values(), rules, judged, wrong)}


def _scan_says(measured, rules, judged, wrong=()) -> str:
    """One line: what a scan of a call of this op on DirectML says, most serious first."""
    if any(j["kind"] == "aborts" for j in judged):
        return "ends the process on DirectML (a sample call, judged by the rules; the live guard refuses it)"
    if judged:
        return "raises on DirectML (a sample call, judged by the rules)"
    if rules:
        return "fails on DirectML for the calls the rules name (other calls run)"
    # a class of calls measured wrong (RReLU's lost slopes, re-probe 21 case 27), not the table's "none" corrections
    if any(m["flagged_wrong"] for m in measured) or any(not w["class"].startswith("none:") for w in wrong):
        return "runs, with wrong results for the calls the measured classes name"
    if any(m["fallback"] for m in measured) and not any(m["device"] for m in measured):
        return "falls back to the CPU"
    if measured:
        return "runs on the device"
    return ""
