"""Each replayed signature's prediction against what real torch-directml did: the rows of a Confirmation."""
from __future__ import annotations

from dmlprof.report.confirmation import Confirmation, ConfirmationRow
from dmlprof.schema import DEVICE, FALLBACK


def _predicted_verdict(ops, seqs: list, failed_seq, failure_kind: str) -> str:
    if failed_seq is not None and failed_seq in seqs:
        return failure_kind
    verdicts = set(ops.loc[ops["seq"].isin(seqs), "verdict"])
    return FALLBACK if FALLBACK in verdicts else DEVICE


def _shapes(signature: dict) -> str:
    parts = []
    for described in signature["tensors"]:
        shape = "x".join(str(d) for d in described["shape"]) or "0-d"
        contiguous = _contiguous_strides(described["shape"])
        parts.append(shape if described["stride"] == contiguous or not described["shape"] else f"{shape} strides {described['stride']}")
    return ", ".join(parts)


def _contiguous_strides(shape: list) -> list:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return list(reversed(strides))


def _detail(result: dict) -> str:
    if result.get("outcome") == "fallback":
        return "falls back: " + ", ".join(result.get("fallback_ops") or [])
    if result.get("wrong"):
        return f"{result.get('what', 'output')}: {result.get('reason', '')}"
    if result.get("message"):
        return str(result["message"])[:300]
    if str(result.get("values", "")).startswith("not compared"):
        return str(result["values"])
    return ""


def confirmation(session, capture, results: dict, adapter: str, workers: int, seconds: float, model: str):
    from dmlprof.report.known_wrong import wrong_seqs
    from dmlprof.tables.measured import load_measured

    ops = session.ops
    flagged = wrong_seqs(ops, load_measured("dml"))
    failure = session.meta.device_failure
    failed_seq = int(ops["seq"].max()) if failure is not None and not ops.empty else None
    failure_kind = failure.kind if failure is not None and failure.kind in ("raises", "aborts") else "raises"
    by_seq = ops.set_index("seq")
    rows = []
    for found in capture.rows():
        seqs = found["rows"]
        first = by_seq.loc[seqs[0]] if seqs[0] in by_seq.index else None
        result = results.get(found["key"], {"outcome": "not_measured"})
        compared = result.get("values") == "compared"
        flagged_as = next((flagged[seq] for seq in seqs if seq in flagged), "")
        detail = "; ".join(part for part in (f"flagged: {flagged_as}" if flagged_as else "", _detail(result)) if part)
        rows.append(ConfirmationRow(
            op=found["op"], dtypes=",".join(sorted({t["dtype"] for t in found["tensors"]})), shapes=_shapes(found),
            calls=len(seqs), phase=str(first["phase"]) if first is not None else "",
            module=str(first["module"]) if first is not None else "",
            source=str(first["source"]) if first is not None else "",
            predicted=_predicted_verdict(ops, seqs, failed_seq, failure_kind),
            predicted_wrong=bool(flagged_as),
            real=str(result.get("outcome", "not_measured")),
            real_wrong=bool(result.get("wrong")) if compared else None,
            max_abs_error=result.get("max_abs_error"), detail=detail))
    return Confirmation(model, adapter, tuple(rows), seconds, workers, tuple(sorted(capture.unreplayable.items())))
