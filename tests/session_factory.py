"""Sessions built directly from synthetic op frames, for renderer tests (no model runs)."""
from __future__ import annotations

import pandas as pd

from dmlprof.schema import typed_ops_frame
from dmlprof.session import Session

HOSTILE = "<script>alert(1)</script>"


def make_session(calls, meta=None, extras=None) -> Session:
    """calls: dicts with at least op and time_ns; the rest gets plausible defaults."""
    rows = []
    clock = 0
    for seq, call in enumerate(calls):
        row = {"seq": seq, "step": 0, "phase": "forward", "verdict": "device", "evidence": "tensors",
               "fallback_ops": "", "fallback_calls": 0, "module": "Net.fc", "source": "model.py:10",
               "input_devices": "dml", "output_devices": "dml", "dtypes": "float32", "shapes": "[[2, 3]]",
               "start_ns": clock, "bytes_moved": 0, "transfer": "", "thread": 0, "ranges": ""}
        row.update(call)
        if row["verdict"] == "fallback" and not row["fallback_ops"]:
            row["fallback_ops"] = f"{row['op']}=1"
            row["fallback_calls"] = 1
        clock = row["start_ns"] + row["time_ns"] + 100
        rows.append(row)
    base = {"backend": "dml", "device": "privateuseone:0", "device_name": "Test GPU", "mode": "live",
            "model": "models/test.py", "model_name": "test", "torch_version": "2.4.1",
            "backend_versions": {"torch-directml": "0.2.5.dev240914"}, "batch_size": 8, "steps": 1}
    base.update(meta or {})
    return Session(meta=base, ops=typed_ops_frame(pd.DataFrame(rows)), **(extras or {}))  # verify=, sweep=, ...


def fallback_mix() -> Session:
    return make_session([
        {"op": "aten::addmm", "time_ns": 5_000},
        {"op": "aten::addmm", "time_ns": 5_000},
        {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 20_000, "module": "Net.pool", "bytes_moved": 64},
        {"op": "aten::_foreach_lerp_.Scalar", "verdict": "fallback", "time_ns": 90_000, "phase": "optimizer",
         "module": "", "source": "train.py:3", "fallback_ops": "aten::lerp.Scalar_out=4", "fallback_calls": 4,
         "bytes_moved": 4096},
        {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 30_000, "module": "Net.pool", "source": "model.py:22"},
        {"op": "aten::nonzero", "verdict": "cpu", "time_ns": 1_000},
    ])


SWEEP = {
    "rows": [
        {"batch_size": 8, "status": "ok", "samples_per_s": 100.0, "step_ms_p50": 80.0, "step_ms_p95": 90.0,
         "peak_memory_bytes": 1 << 20, "memory_source": "test", "fallback_time_share": 0.1, "error": None},
        {"batch_size": 16, "status": "ok", "samples_per_s": 180.0, "step_ms_p50": 89.0, "step_ms_p95": 95.0,
         "peak_memory_bytes": 2 << 20, "memory_source": "test", "fallback_time_share": 0.1, "error": None},
        {"batch_size": 32, "status": "oom", "samples_per_s": 0.0, "step_ms_p50": 0.0, "step_ms_p95": 0.0,
         "peak_memory_bytes": None, "memory_source": "test", "fallback_time_share": 0.0, "error": "out of memory"},
    ],
    "recommended_batch_size": 16, "knee_batch_size": None, "memory_budget_bytes": 3 << 20,
}
