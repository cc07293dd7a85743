"""One synthetic Session per kind of run the renderers meet (no model runs, fixed values).

The golden tests render each of them and compare with tests/golden/; the
renderer-over-every-kind test checks what each renderer says about each kind.
"""
from __future__ import annotations

import copy
import json

import pandas as pd

from dmlprof.distributed import env
from dmlprof.distributed.annotate import frame_columns
from dmlprof.distributed.run_dir import load_run
from dmlprof.record.collectives import collectives_frame
from dmlprof.session import Session
from session_factory import SWEEP, make_session

#: run facts every kind shares, fixed so that the output never depends on the machine
ENVIRONMENT = {
    "dmlprof_version": "0.1.0", "python_version": "3.11.7", "platform": "Linux-test", "started_at": "2026-01-02T03:04:05",
    "duration_s": 1.5, "sync": True, "profiler": True, "partial": False,
}
#: facts only a model-contract run has
_CONTRACT_ONLY = ("batch_size", "warmup_steps", "steps_requested", "optimizer", "loss_fn", "parameters")
_CONTRACT = {"run_mode": "contract", "batch_size": 8, "warmup_steps": 1, "steps": 3, "steps_requested": 3,
             "optimizer": "AdamW", "loss_fn": "default", "parameters": 1234,
             "timing": "wall time per call, device synchronised after each call",
             "recording": "every call of every measured step through the dispatcher",
             "step_times_ms": [12.5, 11.0, 13.25]}


def _meta(*parts: dict, **values) -> dict:
    """Later parts and keywords win (``dict(a, **b, k=v)`` refuses a key given twice)."""
    merged: dict = {}
    for part in parts + (values,):
        merged.update(part)
    return merged


def _changed(session: Session, drop=(), **changes) -> Session:
    """``session`` with some run facts changed or dropped (a RunMeta is frozen: a new Session)."""
    meta = {k: v for k, v in session.meta.to_dict().items() if k not in drop}
    meta.update(changes)
    return Session(meta=meta, ops=session.ops, **session.extras)


_FORWARD = '[["forward", 1]]'
_FEATURES = '[["forward", 1], ["features", 1]]'


def _dml_calls() -> list:
    """Device calls, two fallback hotspots (one a composite), a host copy, a read-back, calls on CPU tensors and
    the host's bookkeeping (step counters)."""
    return [
        {"op": "aten::_to_copy", "time_ns": 40_000, "phase": "other", "module": "", "source": "train.py:5",
         "transfer": "h2d", "bytes_moved": 8192, "input_devices": "cpu"},
        # the scanned code's record_function ranges: "features" inside "forward"; "features" again in backward
        {"op": "aten::convolution", "time_ns": 300_000, "module": "Net.features.0", "ranges": _FORWARD},
        {"op": "aten::native_group_norm", "time_ns": 50_000, "module": "Net.features.1", "ranges": _FEATURES},
        {"op": "aten::convolution", "time_ns": 310_000, "module": "Net.features.2", "ranges": _FEATURES},
        {"op": "aten::native_group_norm_backward", "verdict": "fallback", "time_ns": 200_000, "phase": "backward",
         "module": "Net.features.1", "source": "models/net.py:40", "bytes_moved": 1 << 20,
         "ranges": '[["features", 2]]'},
        {"op": "aten::native_group_norm_backward", "verdict": "fallback", "time_ns": 150_000, "phase": "backward",
         "module": "Net.features.3", "source": "models/net.py:41", "bytes_moved": 1 << 20,
         "ranges": '[["features", 2]]'},
        {"op": "aten::convolution_backward", "time_ns": 600_000, "phase": "backward", "module": "Net.features.0"},
        {"op": "aten::_foreach_lerp_.Scalar", "verdict": "fallback", "time_ns": 90_000, "phase": "optimizer",
         "module": "optimizer.AdamW", "source": "", "fallback_ops": "aten::lerp.Scalar_out=4", "fallback_calls": 4,
         "bytes_moved": 4096},
        {"op": "aten::_local_scalar_dense", "verdict": "cpu", "time_ns": 2_000, "phase": "optimizer",
         "module": "optimizer.AdamW", "source": "", "input_devices": "cpu", "output_devices": ""},
        # AdamW's step counters: 0-dim CPU tensors the host keeps, bookkeeping rather than a finding
        {"op": "aten::_foreach_add_.Scalar", "verdict": "cpu", "time_ns": 3_000, "phase": "optimizer",
         "module": "optimizer.AdamW", "source": "", "input_devices": "cpu", "output_devices": "cpu",
         "shapes": "[[], []]"},
        {"op": "aten::_local_scalar_dense", "time_ns": 7_000, "phase": "other", "module": "", "source": "train.py:9",
         "transfer": "d2h", "bytes_moved": 4},
        {"op": "aten::nonzero", "time_ns": 9_000, "phase": "forward", "module": "Net.head", "source": "models/net.py:50",
         "transfer": "sync"},
    ]


def live_dml() -> Session:
    """A contract-mode scan on a DirectML device: fallbacks, copies, host calls, warnings, notes."""
    meta = _meta(ENVIRONMENT, _CONTRACT, backend="dml", device="privateuseone:0", device_name="Test GPU",
                mode="live", model="models/net.py", model_name="net", torch_version="2.4.1",
                backend_versions={"torch-directml": "0.2.5.dev240914"},
                memory={"allocated_bytes": 1 << 20, "peak_bytes": 3 << 20, "total_bytes": 1 << 30, "source": "test"},
                profiler_check={"matched_ops": 6, "time_ms": 1.6, "profiler_time_ms": 1.5, "ratio": 1.0667},
                warnings=[{"category": "UserWarning", "message": "a user warning\nsecond line", "count": 3}],
                module_classes={"Net": "Net", "Net.features": "Sequential", "Net.features.0": "Conv2d",
                                 "Net.features.1": "GroupNorm", "Net.features.2": "Conv2d",
                                 "Net.features.3": "GroupNorm", "Net.head": "Linear"})
    return make_session(_dml_calls(), meta=meta)


def live_cpu() -> Session:
    """A scan where the CPU is the device: nothing can fall back."""
    calls = [{"op": op, "time_ns": t, "phase": phase, "input_devices": "cpu", "output_devices": "cpu",
              "evidence": "backend", "module": module}
             for op, t, phase, module in (("aten::convolution", 400_000, "forward", "Net.conv"),
                                          ("aten::convolution_backward", 900_000, "backward", "Net.conv"),
                                          ("aten::add_.Tensor", 10_000, "optimizer", "optimizer.SGD"),
                                          ("aten::_to_copy", 1_000, "other", ""))]
    meta = _meta(ENVIRONMENT, _CONTRACT, backend="cpu", device="cpu", device_name="x86_64", mode="live",
                model="models/net.py", model_name="net", torch_version="2.13.0+cpu", backend_versions={},
                timing="wall time per call on the CPU", sync=False, optimizer="SGD")
    return make_session(calls, meta=meta)


def live_cuda() -> Session:
    """A CUDA scan: torch.profiler's kernel times joined to each call (a device-time column)."""
    calls = [{"op": "aten::addmm", "time_ns": 50_000, "device_time_ns": 30_000, "input_devices": "cuda",
              "output_devices": "cuda"},
             {"op": "aten::addmm", "time_ns": 40_000, "device_time_ns": 25_000, "phase": "backward"},
             {"op": "aten::relu", "time_ns": 5_000}]
    meta = _meta(ENVIRONMENT, _CONTRACT, backend="cuda", device="cuda:0", device_name="Test H100", mode="live",
                model="models/mlp.py", model_name="mlp", torch_version="2.13.0", backend_versions={"cuda": "12.8"},
                device_time_check={"calls_device_time_ms": 0.055, "profiler_kernel_time_ms": 0.06, "ratio": 0.9167})
    return make_session(calls, meta=meta)


def steady_nosync() -> Session:
    """--no-sync: one structure step through the dispatcher, measured steps timed by torch.profiler."""
    return _changed(
        live_dml(),
        sync=False, timing="host-side time per call (--no-sync): device work may finish later and be billed to another call",
        recording="one structure step through the dispatcher; measured steps timed per call by torch.profiler "
                  "and aligned with it by op name (--no-sync)",
        structure_step_ms=40.5,
        steady_state={"structure_step_calls": 11, "matched_steps": 3, "unmatched_steps": [],
                      "fallback_mismatch_steps": [], "calls_timed_from_structure_step": 0},
        profiler_check={"note": "measured steps were timed by torch.profiler itself"},
        notes=["steps [2] differed from the structure step and are kept, but their fallbacks differed; "
               "scan without --no-sync to record every call of every step"])


def script_mode() -> Session:
    """A script run as ``__main__``: 1 warm-up optimizer step, 2 recorded, then stopped."""
    return _changed(live_dml(), drop=_CONTRACT_ONLY, run_mode="script", steps=2, script_args=["--epochs", "1"],
                    script_window={"warmup_steps": 1, "steps_requested": 2, "optimizer_steps_taken": 3,
                                   "window_closed": True, "run_to_end": False},
                    step_times_ms=[], recording="every call of the whole script through the dispatcher",
                    model="train.py", model_name="train")


def script_device_unused() -> Session:
    """A script that put nothing on the scanned device (it chose the CPU itself)."""
    calls = [dict(call, input_devices="cpu", output_devices="cpu", verdict="cpu", transfer="", bytes_moved=0)
             for call in _dml_calls()
             if call.get("verdict", "device") != "fallback"]
    meta = _changed(script_mode(), device_unused={"devices_used": ["cpu"], "hint": "--from cuda"}).meta.to_dict()
    return make_session(calls, meta=meta)


def profile_block() -> Session:
    """``with dmlprof.profile(...)``: a block of code."""
    return _changed(live_dml(), drop=_CONTRACT_ONLY, run_mode="block", steps=1, step_times_ms=[], model="block",
                    model_name="block", recording="every call of the block through the dispatcher")


def partial() -> Session:
    """A scan that stopped early: what ran is kept, marked partial."""
    return _changed(live_dml(), partial=True, partial_reason="step 2 raised RuntimeError: boom", steps=1,
                    step_times_ms=[12.5])


def predicted() -> Session:
    """``--target dml``: verdicts from the op table, no times; a value made up beyond the budget (the calls
    from the sixth on are guesses), and a fallback only its torch (2.13) reaches."""
    attention = {"op": "aten::_safe_softmax", "verdict": "fallback", "module": "Net.attn", "source": "models/net.py:30",
                 "fallback_ops": "aten::isneginf.out=1", "fallback_calls": 1, "bytes_moved": 2048}
    calls = [dict(call, time_ns=0, start_ns=0, evidence="table") for call in _dml_calls() + [attention]]
    meta = dict(ENVIRONMENT, run_mode="contract", backend="dml", device="privateuseone:0",
                device_name="torch-directml (predicted, no device)", mode="predicted", target="dml",
                model="models/net.py", model_name="net", torch_version="2.13.0",
                backend_versions={"torch_directml": "0.2.5.dev240914"}, batch_size=8, warmup_steps=0, steps=1,
                steps_requested=1, optimizer="AdamW", loss_fn="default", parameters=1234, sync=False, profiler=False,
                timing="none: a predicted session has no times (time columns are 0)",
                table_version="torch-directml 0.2.5.dev240914 (torch 2.4.1)", table_torch_version="2.4.1",
                step_times_ms=[], memory={}, warnings=[], unknown_ops=["aten::new_op"],
                unknown_op_calls={"aten::new_op": 2}, placeholder_ops={"aten::_local_scalar_dense": 1}, drift_ops=[],
                predicted_guess={"first_seq": 6, "op": "aten::_local_scalar_dense", "source": "models/net.py:44",
                                 "why": "beyond the prediction's budget of 2,048 MiB of values"},
                notes=["ops unknown to the table: this torch (2.13.0) differs from the table's (2.4.1)"])
    return make_session(calls, meta=meta)


def verified() -> Session:
    """``scan --verify`` that found a divergent op and a lost update."""
    session = _changed(live_dml(), verify=True)
    divergent = [
        {"seq": 2, "step": s, "phase": "forward", "op": "aten::native_group_norm", "module": "Net.features.1",
         "source": "models/net.py:30", "what": "output 0", "reason": "values differ beyond tolerance",
         "max_abs_error": e, "max_rel_error": e / 4, "mismatched": 3, "numel": 64, "rtol": 1.3e-6, "atol": 1e-5,
         "input_shapes": [[2, 4, 8], [4]], "input_dtypes": ["float32", "float32"], "output_shape": [2, 4, 8],
         "output_dtype": "float32", "outputs_divergent": ["output 0"]}
        for s, e in ((0, 0.5), (1, 0.75))
    ]
    session.verify = {
        "device_type": "privateuseone", "backend": "dml", "checked_calls": 20, "checked_ops": 6, "divergent_calls": 2,
        "divergent": divergent, "divergent_records_capped": False, "skipped_calls": 4,
        "skipped": {"random": {"reason": "random results", "calls": 4, "ops": {"aten::dropout": 4}}},
        "optimizer_steps": 3, "parameters_checked": 12, "parameters_not_expected_to_move": 0,
        "lost_updates": [{"parameter": "Net.head.weight", "optimizer": "AdamW", "step": 1, "shape": [10, 4],
                          "dtype": "float32", "max_abs_grad": 0.25, "lr": 0.001}],
        "tolerances": {"float32": {"rtol": 1.3e-6, "atol": 1e-5}}, "partial": False,
    }
    return session


def replaced() -> Session:
    """``scan --replace``: the patched run, with the before/after comparison."""
    session = _changed(live_dml(), replacements_applied=3)
    session.replace = {
        "before": {"steps": 3, "fallback_calls": 9, "inner_fallback_calls": 30, "fallback_calls_per_step": 3.0,
                   "fallback_time_share": 0.25, "fallback_bytes_moved_per_step": 3 << 20, "step_time_ms": 20.0,
                   "fallback_ops": {"aten::native_group_norm_backward": 6, "aten::_foreach_lerp_.Scalar": 3},
                   "inner_ops": {"aten::_foreach_lerp_.Scalar": ["aten::lerp.Scalar_out"],
                                 "aten::native_group_norm_backward": ["aten::native_group_norm_backward"]}},
        "after": {"steps": 3, "fallback_calls": 3, "inner_fallback_calls": 24, "fallback_calls_per_step": 1.0,
                  "fallback_time_share": 0.05, "fallback_bytes_moved_per_step": 4096, "step_time_ms": 12.5,
                  "fallback_ops": {"aten::_foreach_lerp_.Scalar": 3},
                  "inner_ops": {"aten::_foreach_lerp_.Scalar": ["aten::lerp.Scalar_out"]}},
        "fallback_calls_removed": 6, "step_time_speedup": 1.6,
        "removed_ops": ["aten::native_group_norm_backward"],
        "remaining_ops": [{"op": "aten::_foreach_lerp_.Scalar", "calls": 3, "replacement": None}],
        "applied": [{"target": "model", "what": "GroupNorm"}, {"target": "optimizer", "what": "lerp"},
                    {"target": "loss", "what": "loss runs under the replacements"}],
    }
    return session


def sweep() -> Session:
    """``dmlprof sweep``: no op rows, the sweep in extras."""
    meta = dict(ENVIRONMENT, backend="dml", device="privateuseone:0", device_name="Test GPU", mode="sweep",
                run_mode="sweep", model="models/net.py", model_name="net", torch_version="2.4.1",
                sweep_stop_reason="out of memory at batch size 32", memory_budget="3.0 MiB (--memory-budget)",
                memory_total_bytes=1 << 30,
                sweep_settings={"auto": True, "sizes_planned": [8, 16, 32, 64], "steps": 6, "warmup_steps": 1,
                                "amp": None, "max_batch_size": 4096, "time_budget_s": 150.0,
                                "child_memory_limit_bytes": None},
                sweep_notes=["a note from a child"],
                sweep_details=[{"batch_size": 8, "step_times_ms": [80.0, 81.0], "fallback_recorded": True,
                                "fallback_ops": ["aten::lerp.Scalar_out"], "elapsed_s": 2.0},
                               {"batch_size": 16, "step_times_ms": [89.0, 95.0], "fallback_recorded": True,
                                "fallback_ops": ["aten::lerp.Scalar_out"], "elapsed_s": 3.0}])
    for key in ("sync", "profiler"):
        meta.pop(key)
    return Session(meta=meta, sweep=copy.deepcopy(SWEEP))


def empty() -> Session:
    """A live scan that recorded no op call."""
    meta = _meta(ENVIRONMENT, _CONTRACT, backend="dml", device="privateuseone:0", device_name="Test GPU",
                mode="live", model="models/net.py", model_name="net", torch_version="2.4.1", step_times_ms=[])
    return make_session([], meta=meta)


KINDS = {
    "live_dml": live_dml, "live_cpu": live_cpu, "live_cuda": live_cuda, "steady_nosync": steady_nosync,
    "script_mode": script_mode, "script_device_unused": script_device_unused, "profile_block": profile_block,
    "partial": partial, "predicted": predicted, "verified": verified, "replaced": replaced, "sweep": sweep,
    "empty": empty,
}
#: kinds whose session holds op rows (a sweep holds only the sweep)
OP_KINDS = tuple(name for name in KINDS if name != "sweep")


# -- a launched job's ranks ---------------------------------------------------------------------
MS = 1_000_000


def rank_session(rank, *, fallback_ms=0.0, steps=3, compute_ms=10.0, comm_ms=5.0, op="aten::mm"):
    """A contract-mode rank: per step a compute call, maybe a fallback, one all-reduce."""
    calls, collectives, clock = [], [], 0
    for step in range(steps):
        calls.append({"op": op, "time_ns": int(compute_ms * MS), "step": step, "start_ns": clock})
        if fallback_ms:
            calls.append({"op": "aten::native_group_norm_backward", "verdict": "fallback", "phase": "backward",
                          "time_ns": int(fallback_ms * MS), "step": step})
        calls.append({"op": "c10d::allreduce_", "phase": "comm", "time_ns": 100_000, "step": step,
                      "shapes": "[[1000]]", "dtypes": "float32"})
        clock += 50 * MS
    session = make_session(calls, meta={"model_name": "net", "run_mode": "contract", "backend": "cpu",
                                        "step_times_ms": [40.0] * steps,
                                        "distributed": {"rank": rank, "local_rank": rank, "world_size": 2,
                                                        "local_world_size": 2, "node_rank": 0, "backend": "gloo"}})
    frame = collectives_frame(session.ops, None)
    frame["comm_time_ns"] = pd.array([int(comm_ms * MS)] * len(frame), dtype="Int64")
    session.collectives = frame_columns(frame)
    return session


def job_run(tmp_path, sessions, errors=()):
    """A launched job's run folder with these rank sessions and error lines, loaded."""
    for rank, session in sessions.items():
        session.save(env.session_path(tmp_path, rank))
    for rank, line in errors:
        (tmp_path / f"rank{rank}.error.json").write_text(json.dumps({"rank": rank, "line": line}))
    return load_run(tmp_path)
