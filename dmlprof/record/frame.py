"""Turn the recorder's raw per-call tuples into the Session's op frame.

Everything string-shaped or judged (verdicts, devices, shapes) is decided here,
once, after recording, so the per-call hot path stays small. The frame's
schema (columns, verdicts, phases, fallback lists) lives in :mod:`dmlprof.schema`.
A call's evidence is read here (device, fallback, or cpu); the frame leaves through
:func:`~dmlprof.schema.typed_ops_frame`, which makes the verdict final (a ``cpu``
call on scalars only is the host's bookkeeping, ``host``) for this frame and for a
loaded session file's alike, so no reader ever sees a half-judged column.
"""
from __future__ import annotations

import pandas as pd

from dmlprof.schema import (  # noqa: F401  (re-exported: the frame's schema, by its old names)
    CPU, DEVICE, FALLBACK, OP_COLUMNS, REFUSED, SYNC_OPS, VERDICTS, empty_ops_frame, format_fallback_ops, parse_fallback_ops,
    typed_ops_frame,
)

# Copies between host and device: (op, how to read the direction).
_COPY_OPS = {"aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::to"}
_READ_BACK_OPS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal"})
# ``torch.tensor(data, device=...)`` builds a CPU tensor and copies it to the device with every
# dispatch key but the backend's excluded (no recorder sees that copy), then calls ``lift_fresh``
# on the result: a lift_fresh of a device tensor is that constructor's host-to-device copy.
_CONSTRUCTOR_OPS = frozenset({"aten::lift_fresh"})

_op_names: dict = {}


def op_name(func) -> str:
    """The dispatcher's spelling of an overload: ``aten::lerp.Scalar_out`` (a journaled call's is that already)."""
    if isinstance(func, str):
        return func
    name = _op_names.get(func)
    if name is None:
        schema = func._schema
        name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        _op_names[func] = name
    return name


def base_name(op: str) -> str:
    """``aten::lerp.Scalar_out`` -> ``aten::lerp`` (the profiler's spelling)."""
    return op.split(".", 1)[0]


def leaves_device(func, inputs, outputs, device_type: str) -> bool:
    """Whether a call touches the host: tensors off the device, or a sync."""
    if any(m[0] != device_type for m in inputs) or any(m[0] != device_type for m in outputs):
        return True
    return base_name(op_name(func)) in SYNC_OPS or op_name(func) in _CONSTRUCTOR_OPS


def _devices(meta) -> str:
    return ",".join(sorted({m[0] for m in meta}))


def _transfer(op: str, inputs, outputs, device_type: str) -> tuple:
    """(bytes moved, direction) for host<->device copies and syncs."""
    base = base_name(op)
    if base in SYNC_OPS:
        if not any(m[0] == device_type for m in inputs):
            return 0, ""
        if base in _READ_BACK_OPS:
            return sum(m[3] for m in inputs if m[0] == device_type), "d2h"
        return 0, "sync"
    if op in _CONSTRUCTOR_OPS:
        on_device = [m for m in inputs if m[0] == device_type]
        return (on_device[0][3], "h2d") if on_device else (0, "")
    if base_name(op) not in _COPY_OPS:
        return 0, ""
    if base_name(op) == "aten::copy_" and len(inputs) >= 2:
        dst, src = inputs[0], inputs[1]
    elif inputs and outputs:
        src, dst = inputs[0], outputs[0]
    else:
        return 0, ""
    if src[0] == dst[0]:
        return 0, ""
    if dst[0] == device_type and src[0] == "cpu":
        return src[3], "h2d"
    if src[0] == device_type and dst[0] == "cpu":
        return src[3], "d2h"
    return src[3], f"{src[0]}->{dst[0]}"


def rows_to_frame(raw_rows, evidence: list, backend, refused=frozenset()) -> pd.DataFrame:
    """Judge each raw call and return the op frame (one row per call), its verdicts final.

    ``evidence`` is what arrived while recording (warnings, or a stand-in
    backend's own log); each row holds its span of it, and the backend names
    the op that fell back in each item. ``refused``: the rows of calls the device refused (their evidence says so).
    """
    device_type = backend.device_type
    accelerator = backend.is_accelerator()
    out = {column: [] for column in OP_COLUMNS}
    origin = raw_rows[0][5] if raw_rows else 0
    threads: dict = {}  # OS thread ids -> 0, 1, 2... in order of appearance
    for seq, (step, phase, func, inputs, outputs, start, elapsed, warn_lo, warn_hi, module, source, thread,
              *more) in enumerate(raw_rows):
        op = op_name(func)
        fallen = []
        if warn_hi > warn_lo:
            for message in evidence[warn_lo:warn_hi]:
                name = backend.fallback_ops_in(message)
                if name:
                    fallen.append(name)
        on_device = any(m[0] == device_type for m in inputs) or any(m[0] == device_type for m in outputs)
        moved, direction = (0, "")
        if not accelerator:
            verdict, evidence_label = DEVICE, "backend"
        elif fallen:
            verdict, evidence_label = FALLBACK, backend.fallback_evidence
            moved = sum(m[3] for m in inputs if m[0] == device_type) + sum(m[3] for m in outputs if m[0] == device_type)
            direction = "both"
        elif on_device:
            verdict, evidence_label = DEVICE, REFUSED if seq in refused else "tensors"
            moved, direction = _transfer(op, inputs, outputs, device_type)
        else:
            verdict, evidence_label = CPU, "tensors"  # or host bookkeeping: typed_ops_frame tells
        out["seq"].append(seq)
        out["step"].append(step)
        out["phase"].append(phase)
        out["op"].append(op)
        out["verdict"].append(verdict)
        out["evidence"].append(evidence_label)
        out["fallback_ops"].append(format_fallback_ops(fallen) if fallen else "")
        out["fallback_calls"].append(len(fallen))
        out["module"].append(module)
        out["source"].append(source)
        out["input_devices"].append(_devices(inputs))
        out["output_devices"].append(_devices(outputs))
        out["dtypes"].append(",".join(sorted({str(m[1]).replace("torch.", "") for m in inputs + outputs})))
        out["shapes"].append(str([list(m[2]) for m in inputs]))
        out["start_ns"].append(start - origin)
        out["time_ns"].append(elapsed)
        out["device_time_ns"].append(None)
        out["bytes_moved"].append(moved)
        out["transfer"].append(direction)
        out["thread"].append(threads.setdefault(thread, len(threads)))
        out["ranges"].append("")  # the profiler's to tell (record.profiler.join_call_events)
        out["arguments"].append(more[0] if more else "")
    # typed_ops_frame makes the verdicts final (host bookkeeping): every producer and every loaded file meet there
    return empty_ops_frame() if not raw_rows else typed_ops_frame(pd.DataFrame(out, columns=list(OP_COLUMNS)))
