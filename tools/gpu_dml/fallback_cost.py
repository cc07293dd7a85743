"""What a CPU fallback costs on a real DirectML device, and what dmlprof's replacements save there.

For one model (its own optimizer), in one process:
1. ``--rounds`` rounds alternating ``--steps`` bare steps of the plain model and of the model under
   dmlprof's replacements (``dmlprof.replaced_scan.apply_to_training_step``; ``--warmup`` untimed
   steps before each): the measured saving per step.
2. One step recorded with per-call sync (dmlprof's default scan mode): each fallback call's time
   (device->host copies, the CPU kernel, host->device copies, the sync it forces), its bytes.
3. The same step recorded on the CPU: each op's CPU kernel time (what the fallback runs on the host).
4. Host<->device copy bandwidth at 1, 4 and 16 MiB, and the cost of one synchronize.
5. What one more device call costs an unsynced step (``queued_call_us``: the fallback cost model's
   per-call constant, dmlprof/tables/data/adapter_costs.json), and each fallback call of step 2 as the
   op frame holds it (``sync_recorded_step.calls_detail``), so that benchmarks/fallback_model.py can
   price it and compare with what was measured here.

    python fallback_cost.py --repo DMLPROF_CHECKOUT --model models/groupnorm_net.py --device dml --out f.json
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="dml")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    import torch
    from dmlprof.analysis.fallback_cost import device_kernels
    from dmlprof.backends import resolve_backend
    from dmlprof.record.frame import rows_to_frame
    from dmlprof.record.recorder import Recorder
    from dmlprof.replaced_scan import apply_to_training_step
    from dmlprof.runner import TrainingStep

    backend = resolve_backend(args.device)
    path = repo / args.model
    training = TrainingStep.from_file(path, backend, args.batch_size)
    result: dict = {"model": path.name, "batch_size": training.batch_size, "device": backend.name,
                    "device_name": backend.device_name(), "versions": backend.versions(),
                    "torch_version": torch.__version__, "python_version": platform.python_version(),
                    "date": time.strftime("%Y-%m-%d", time.gmtime()), "optimizer": type(training.optimizer).__name__}
    out = Path(args.out)

    def save():
        out.write_text(json.dumps(result, indent=1) + "\n")

    def bare_steps(n):
        times = []
        for _ in range(n):
            start = time.perf_counter_ns()
            loss = training.run()
            backend.synchronize([loss])
            times.append((time.perf_counter_ns() - start) / 1e6)
        return times

    # 1. plain vs replaced, interleaved
    loss_fn = training.loss_fn
    plain, replaced, applied = [], [], []
    for r in range(args.rounds):
        bare_steps(args.warmup)
        plain.append(statistics.median(bare_steps(args.steps)))
        applied.clear()
        handle = apply_to_training_step(training, applied)
        try:
            bare_steps(args.warmup)
            replaced.append(statistics.median(bare_steps(args.steps)))
        finally:
            handle.undo()
            training.loss_fn = loss_fn
        print(f"round {r}: plain {plain[-1]:.2f} ms, replaced {replaced[-1]:.2f} ms", flush=True)
        result["replace"] = {
            "plain_step_ms_per_round": [round(t, 3) for t in plain],
            "replaced_step_ms_per_round": [round(t, 3) for t in replaced],
            "plain_step_ms": round(statistics.median(plain), 3),
            "replaced_step_ms": round(statistics.median(replaced), 3),
            "saving_ms": round(statistics.median(plain) - statistics.median(replaced), 3),
            "speedup": round(statistics.median(plain) / statistics.median(replaced), 3),
            "changes_applied": len(applied),
        }
        save()

    # 2. one step with per-call sync: each fallback's measured cost
    def recorded_frame(train, be, sync):
        recorder = Recorder(be, sync=sync)
        recorder.modules.name_tree(train.model)
        with recorder:
            loss = train.run(recorder)
            recorder.active = False
            be.synchronize([loss])
        return rows_to_frame(recorder.rows, recorder.evidence, be)

    recorded_frame(training, backend, True)  # warm
    ops = recorded_frame(training, backend, True)
    fb = ops[ops["verdict"] == "fallback"]
    per_op = {}
    for op, group in fb.groupby("op"):
        per_op[op] = {"calls": int(len(group)), "median_us": round(float(group["time_ns"].median()) / 1e3, 1),
                      "total_ms": round(float(group["time_ns"].sum()) / 1e6, 3),
                      "median_bytes_moved": int(group["bytes_moved"].median())}
    result["sync_recorded_step"] = {
        "calls": int(len(ops)), "fallback_calls": int(len(fb)),
        "fallback_ms": round(float(fb["time_ns"].sum()) / 1e6, 3),
        "device_calls_ms": round(float(ops[ops["verdict"] == "device"]["time_ns"].sum()) / 1e6, 3),
        "device_call_median_us": round(float(ops[ops["verdict"] == "device"]["time_ns"].median()) / 1e3, 1),
        "fallback_bytes_moved": int(fb["bytes_moved"].sum()), "fallbacks": per_op,
        # each fallback call as the op frame holds it: what the fallback cost model reads
        "calls_detail": [{"op": r.op, "fallback_ops": r.fallback_ops, "phase": r.phase, "shapes": r.shapes,
                          "dtypes": r.dtypes, "bytes_moved": int(r.bytes_moved),
                          "time_us": round(float(r.time_ns) / 1e3, 1)} for r in fb.itertuples()],
        "device_kernels": device_kernels(ops),
    }
    # 2b. the replaced step, recorded the same way: what the replacements cost on the device in place of the fallbacks
    applied.clear()
    handle = apply_to_training_step(training, applied)
    try:
        recorded_frame(training, backend, True)  # warm
        replaced_ops = recorded_frame(training, backend, True)
    finally:
        handle.undo()
        training.loss_fn = loss_fn
    on_device = replaced_ops[replaced_ops["verdict"] == "device"]
    result["sync_recorded_replaced_step"] = {
        "calls": int(len(replaced_ops)), "device_calls": int(len(on_device)),
        "fallback_calls": int((replaced_ops["verdict"] == "fallback").sum()),
        "device_calls_ms": round(float(on_device["time_ns"].sum()) / 1e6, 3),
        "all_calls_ms": round(float(replaced_ops["time_ns"].sum()) / 1e6, 3),
        "plain_all_calls_ms": round(float(ops["time_ns"].sum()) / 1e6, 3),
        "plain_device_calls": int((ops["verdict"] == "device").sum()),
        # a composite foreach on DirectML runs one kernel per tensor: the calls the cost model prices
        "device_kernels": device_kernels(replaced_ops), "plain_device_kernels": device_kernels(ops),
    }
    save()

    # 3. the same step on the CPU: the CPU kernels a fallback runs
    cpu_backend = resolve_backend("cpu")
    cpu_training = TrainingStep.from_file(path, cpu_backend, args.batch_size)
    recorded_frame(cpu_training, cpu_backend, False)
    cpu_ops = recorded_frame(cpu_training, cpu_backend, False)
    result["cpu_kernel_us"] = {
        op: round(float(cpu_ops[cpu_ops["op"] == op]["time_ns"].median()) / 1e3, 1)
        for op in per_op if (cpu_ops["op"] == op).any()}
    result["cpu_threads"] = torch.get_num_threads()
    save()

    # 4. copies and sync
    def per_call_us(fn, n=20):
        fn()
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - start) / n / 1e3

    copies = {}
    for mib in (1, 4, 16):
        host = torch.randn(mib << 18)
        dev = host.to(backend.device())
        backend.synchronize([dev])
        d2h = per_call_us(lambda: dev.to("cpu"))
        h2d = per_call_us(lambda: backend.synchronize([host.to(backend.device())]))
        copies[f"{mib}MiB"] = {"d2h_us": round(d2h, 1), "h2d_sync_us": round(h2d, 1),
                               "d2h_GBps": round((mib << 20) / d2h / 1e3, 2), "h2d_GBps": round((mib << 20) / h2d / 1e3, 2)}
    small = torch.ones(16, device=backend.device())
    copies["sync_small_us"] = round(per_call_us(lambda: backend.synchronize([small]), 200), 1)
    copies["d2h_64B_us"] = round(per_call_us(lambda: small.to("cpu"), 200), 1)
    # 5. one more device call in an unsynced step: issued back to back (the model's queued_call_us, as
    # recording_breakdown.py's small_add_us), and a chain of them closed by one sync, less that sync
    x = torch.ones(1024, device=backend.device())
    copies["queued_call_us"] = round(per_call_us(lambda: x.add(1.0), 200), 2)
    for label, numel in (("4KiB", 1024), ("1MiB", 1 << 18)):
        y = torch.ones(numel, device=backend.device())
        backend.synchronize([y])
        start = time.perf_counter_ns()
        for _ in range(200):
            y = y.add(1.0)
        backend.synchronize([y])
        copies[f"chained_call_{label}_us"] = round(((time.perf_counter_ns() - start) / 1e3 - copies["sync_small_us"]) / 200, 2)
    result["copies"] = copies
    save()
    print(json.dumps(result, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
