"""The doctor's reading of a file for calls a ``scan --target dml`` stops on or flags.

The file is read as text, never imported or run. Each :class:`SourceCall` pairs what a user writes
(``F.one_hot(``, ``nn.LSTM(``) with the call it reaches on the device, and the verdict comes from
the rules the scan itself uses, asked with that call, never from a copy of their words:

- :func:`dmlprof.directml.failures.failure` (torch-directml raises or ends the process),
- the shipped op table (the call falls back to the CPU, or, with no CPU kernel either, fails),
- the known errors of :mod:`dmlprof.backends.errors` (what the failure means and what to do),
- the replacement catalog (what removes a fallback).

So a rule that changes changes the doctor's row with it. A text match cannot see arguments:
a row says where the call is written, and that a scan would stop or flag it there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dmlprof.doctor.snapshot import Check, Snapshot, listing

STOPS, FLAGS = "stops", "flags"


@dataclass(frozen=True)
class Verdict:
    """What a scan does at such a call: stops (the step fails) or flags it, why, and what to do."""

    effect: str  # STOPS or FLAGS
    detail: str
    remedy: str


@dataclass(frozen=True)
class SourceCall:
    key: str
    name: str  # how the row names it: what the user wrote
    pattern: re.Pattern
    verdict: Callable[[], Optional[Verdict]]  # asks the scan's rules; None where they say it runs


def _known(message: str, effect: str) -> Optional[Verdict]:
    """The known error a scan reports for this error text (its explanation and remedy)."""
    from dmlprof.backends.errors import match_known_error

    known = match_known_error(message)
    return Verdict(effect, known.explanation, known.remedy) if known else None


def _cuda() -> Optional[Verdict]:
    # What torch raises for a CUDA request on a build without CUDA: the scan's explanation of it
    # names --from cuda, which runs those requests on the scanned device.
    return _known("Torch not compiled with CUDA enabled", STOPS)


def _rule(op: str, args: Callable[[], Tuple[tuple, dict]]) -> Callable[[], Optional[Verdict]]:
    """The failure rule for ``op``, asked with a typical call of it (tensors on the meta device stand for
    the DirectML ones: the rules read shapes and arguments, never values)."""
    def verdict() -> Optional[Verdict]:
        from dmlprof.directml.failures import failure

        args_, kwargs = args()
        found = failure(op, args_, kwargs, "meta")
        return _known(found.error_text(), STOPS) if found else None
    return verdict


def _one_hot_call() -> Tuple[tuple, dict]:
    import torch

    # F.one_hot(labels, n) is zeros(..., n).scatter_(-1, labels.unsqueeze(-1), 1)
    zeros = torch.empty(4, 3, device="meta")
    labels = torch.empty(4, 1, dtype=torch.long, device="meta")
    return (zeros, -1, labels, 1), {}


def _eye_call() -> Tuple[tuple, dict]:
    return (3, 3), {"device": "meta"}


def _tensor_call(*rest) -> Callable[[], Tuple[tuple, dict]]:
    """A call of an op on a 4x3 float tensor of the device, then ``rest``."""
    def call() -> Tuple[tuple, dict]:
        import torch

        return (torch.empty(4, 3, device="meta"),) + rest, {}
    return call


def _table_verdict(op: str) -> Callable[[], Optional[Verdict]]:
    """What the op table says of ``op`` on DirectML: a fallback (flagged, with the catalog's replacement), or a
    fallback torch has no CPU kernel for (the step fails: the scan's known error for it)."""
    def verdict() -> Optional[Verdict]:
        import torch

        from dmlprof.replacements.catalog import advice_for
        from dmlprof.tables import load_table

        table = load_table("dml")
        reached = [op] + [name for name, _ in table.reaches(op)]
        fallback = next((name for name in reached if table.kind(name) == "fallback"), None)
        if fallback is None:
            return None
        if not torch._C._dispatch_has_kernel_for_dispatch_key(fallback, "CPU"):
            return _known(f"Could not run '{fallback}' with arguments from the 'CPU' backend", STOPS)
        advice = advice_for(fallback) or "the scan ranks what it costs"
        return Verdict(FLAGS, f"{fallback} has no DirectML kernel: it runs on the CPU (a fallback)", advice)
    return verdict


def _amax_backward() -> Optional[Verdict]:
    """The wrong-result classes a scan applies, asked with amax's backward as it reaches the device (the incoming
    gradient times a bool mask of where the maximum was)."""
    from dmlprof.report.known_wrong import ZEROED_GRADIENTS_FIX
    from dmlprof.tables.wrong_classes import Call, classes_for

    call = Call("aten::mul.Tensor", ("bool", "float32"), ((4, 3), (4, 3)), phase="backward")
    found = classes_for(call)
    if not found:
        return None
    wrong = found[0]
    return Verdict(FLAGS, f"{wrong.klass}: {wrong.reason}" + (f"; {wrong.consequence}" if wrong.consequence else ""),
                   ZEROED_GRADIENTS_FIX if wrong.zeroes_gradients else wrong.consequence)


SOURCE_CALLS = (
    SourceCall("cuda", ".cuda() / \"cuda\"",
               re.compile(r"\.cuda\(|[\"']cuda(?::\d+)?[\"']"), _cuda),
    SourceCall("one_hot", "F.one_hot", re.compile(r"\bone_hot\s*\("), _rule("aten::scatter_.value", _one_hot_call)),
    SourceCall("rnn", "nn.LSTM / nn.GRU",
               re.compile(r"\b(?:LSTM|GRU|LSTMCell|GRUCell)\s*\("), _table_verdict("aten::_thnn_fused_lstm_cell")),
    SourceCall("scatter_reduce", "scatter_reduce",
               re.compile(r"\bscatter_reduce_?\s*\("), _table_verdict("aten::scatter_reduce.two")),
    SourceCall("eye", "torch.eye", re.compile(r"\btorch\.eye\s*\("), _rule("aten::eye.m", _eye_call)),
    # complex results: an rfft makes a complex tensor on the device, which torch-directml cannot hold
    SourceCall("complex", "torch.fft / complex views",
               re.compile(r"\btorch\.fft\.\w+\s*\(|\bview_as_complex\s*\(|\btorch\.(?:complex|polar)\s*\("),
               _rule("aten::_fft_r2c", _tensor_call([1], 0, True))),
    SourceCall("kthvalue", "kthvalue", re.compile(r"\bkthvalue\s*\("), _rule("aten::kthvalue", _tensor_call(1))),
    # x.amax(dim) / torch.amax: a wrong result in its backward, not a failure (scatter_reduce's "amax" is a string)
    SourceCall("amax", "amax / amin", re.compile(r"\bam(?:ax|in)\s*\("), _amax_backward),
)


def find_calls(paths: Sequence[str], read: Callable[[str], str] = None) -> Dict[str, List[str]]:
    """``{call key: ["file:line", ...]}`` for each :data:`SOURCE_CALLS` pattern in the files (comments skipped)."""
    read = read or (lambda p: Path(p).read_text(encoding="utf-8", errors="replace"))
    found: Dict[str, List[str]] = {}
    for path in paths:
        for number, line in enumerate(read(path).splitlines(), 1):
            code = line.split("#", 1)[0]
            for call in SOURCE_CALLS:
                if call.pattern.search(code):
                    found.setdefault(call.key, []).append(f"{Path(path).name}:{number}")
    return found


def check_source_calls(snap: Snapshot) -> List[Check]:
    """A row per kind of call found in the user's files, with the scan's verdict on it."""
    from dmlprof.doctor.devices import directml_is_the_device

    rows = []
    if snap.torch is None:  # the rules are asked with tensors: without torch the torch row says what to fix
        return rows
    on_dml = directml_is_the_device(snap)
    for call in SOURCE_CALLS:
        where = snap.source_findings.get(f"call:{call.key}", [])
        if not where:
            continue
        verdict = call.verdict()
        if verdict is None:
            continue
        if call.key == "cuda":
            status = "warn"  # not a DirectML failure: the scan needs --from cuda, which the remedy names
        elif verdict.effect == STOPS:
            status = "fail" if on_dml else "info"
        else:
            status = "warn" if on_dml else "info"
        said = "a scan --target dml stops here" if verdict.effect == STOPS else "a scan --target dml flags it"
        rows.append(Check(call.name, status, f"used at {listing(where)}: {said}; {verdict.detail}", verdict.remedy))
    if snap.files and not any(snap.source_findings.get(f"call:{call.key}") for call in SOURCE_CALLS):
        # files read and nothing found: said, so silence is never mistaken for a reading that did not happen
        rows.append(Check("calls a scan flags", "ok",
                          f"none in {listing([Path(f).name for f in snap.files])} of "
                          f"{', '.join(call.name for call in SOURCE_CALLS)} (read as text, not run)"))
    return rows
