"""Step time and fallback calls per model on the emulated DirectML device, before and after dmlprof.patch.

For each model file in models/: build its training step (runner.TrainingStep:
model, batch, loss, the file's own optimizer) on the emulated DirectML device,
then alternate ``--rounds`` rounds of ``--steps`` plain steps and ``--steps``
steps with the replacements applied (each after ``--warmup`` untimed steps) to the same model and optimizer (state
kept; undone between rounds). A model whose plain step fails on the device
(a fallback with no CPU kernel behind it) records the error. Fallback calls per step come
from the emulated device's own counters (not from dmlprof's recorder), and no
recorder runs during the timed steps, so the times are the bare step; one
extra recorded step per mode gives the bytes the fallbacks copy per step.

The emulated device runs every kernel on the host CPU, and there a fallback
costs only a memcpy in host memory, so step times here do not show what a
fallback costs on a real GPU (a device-to-host copy and a wait per call): a
replacement that takes two native kernels where the CPU had one fused kernel
can even be slower here. The fallback counts and bytes carry over to real
DirectML exactly (same op set, same fallback).

    python benchmarks/replacements.py [--batch-size 4] [--steps 3] [--models a.py b.py]

Writes benchmarks/results/replacements.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "replacements.json"


def _run_steps(training, steps: int, testing, record: dict) -> None:
    """Run ``steps`` steps, appending their times (ms) and fallback calls to ``record``."""
    testing.reset_fallback_counts()
    for _ in range(steps):
        started = time.perf_counter()
        loss = training.run()
        loss.item()  # the step is done when its loss can be read
        record["times"].append((time.perf_counter() - started) * 1e3)
    for op, n in testing.fallback_counts().items():
        record["fallbacks"][op] = record["fallbacks"].get(op, 0) + n
    record["steps"] += steps
    record["loss"] = float(loss.detach().cpu())


def _recorded_fallbacks(training, backend) -> tuple:
    """(bytes the fallback calls of one recorded step copy between device and host, the top-level ops
    that fell back). dmlprof's recorder reads them from the same warnings as a scan. On the emulated
    device those copies are memcpys in host memory; on real DirectML each one crosses to the GPU and
    waits for it."""
    from dmlprof.record.frame import rows_to_frame
    from dmlprof.record.recorder import Recorder

    recorder = Recorder(backend, sync=False)
    with recorder:
        training.run(recorder)
    ops = rows_to_frame(recorder.rows, recorder.warnings.messages, backend)
    fallback = ops[ops["verdict"] == "fallback"]
    return int(fallback["bytes_moved"].sum()), sorted(set(fallback["op"]))


def _summary(record: dict) -> dict:
    if record.get("error"):
        return {"error": record["error"]}
    steps = max(record["steps"], 1)
    return {
        "step_time_ms": [round(t, 2) for t in record["times"]],
        "step_time_ms_median": round(statistics.median(record["times"]), 2),
        "step_time_ms_min": round(min(record["times"]), 2),
        "fallback_calls_per_step": sum(record["fallbacks"].values()) / steps,
        "fallback_ops_per_step": {op: n / steps for op, n in sorted(record["fallbacks"].items())},
        "fallback_bytes_moved_per_step": record.get("fallback_bytes"),
        "fallback_top_level_ops": record.get("fallback_top_ops"),
        "loss": record["loss"],
    }


def bench_model(path: Path, backend, batch_size: int, steps: int, warmup: int, rounds: int) -> dict:
    """Alternate rounds of plain and patched steps on one model and optimizer (the host is shared
    and noisy: alternating keeps drift out of the comparison); undo restores the plain model."""
    from dmlprof import testing
    from dmlprof.replaced_scan import apply_to_training_step
    from dmlprof.runner import TrainingStep

    training = TrainingStep.from_file(path, backend, batch_size)
    loss_fn = training.loss_fn
    plain = {"times": [], "fallbacks": {}, "steps": 0, "loss": None}
    patched = {"times": [], "fallbacks": {}, "steps": 0, "loss": None}
    applied: list = []
    for round_index in range(rounds):
        if not plain.get("error"):
            try:
                for _ in range(warmup):
                    training.run().item()
                _run_steps(training, steps, testing, plain)
                if round_index == 0:
                    plain["fallback_bytes"], plain["fallback_top_ops"] = _recorded_fallbacks(training, backend)
            except Exception as exc:  # e.g. a fallback with no CPU kernel behind it
                plain["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        applied.clear()
        handle = apply_to_training_step(training, applied)
        for _ in range(warmup):
            training.run().item()
        _run_steps(training, steps, testing, patched)
        if round_index == 0:
            patched["fallback_bytes"], patched["fallback_top_ops"] = _recorded_fallbacks(training, backend)
        handle.undo()
        training.loss_fn = loss_fn
    before, after = _summary(plain), _summary(patched)
    speedup = speedup_median = None
    if "step_time_ms_median" in before:
        # The fastest step is the least disturbed by other work on a shared host: the headline ratio.
        speedup = round(before["step_time_ms_min"] / after["step_time_ms_min"], 3)
        speedup_median = round(before["step_time_ms_median"] / after["step_time_ms_median"], 3)
    return {
        "model": path.name,
        "optimizer": type(training.optimizer).__name__,
        "batch_size": training.batch_size,
        "changes_applied": len(applied),
        "before": before,
        "after": after,
        "speedup": speedup,
        "speedup_median": speedup_median,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed steps at the start of every round (3: a patched forward or step that "
                             "replaces nothing stops entering the replacement mode after 3 calls)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating plain/patched rounds")
    parser.add_argument("--models", nargs="*", help="model files (default: every file in models/)")
    parser.add_argument("--out", default=str(RESULT))
    args = parser.parse_args(argv)

    from dmlprof.backends import resolve_backend

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    backend = resolve_backend("emulated-dml")
    paths = [Path(p) for p in args.models] if args.models else sorted(
        p for p in (ROOT / "models").glob("*.py") if not p.name.startswith("_"))
    results = []
    for path in paths:
        print(f"{path.name} ...", file=sys.stderr, flush=True)
        row = bench_model(path, backend, args.batch_size, args.steps, args.warmup, args.rounds)
        results.append(row)
        before, after = row["before"], row["after"]
        if "error" in before:
            print(f"  before: {before['error'][:120]}", file=sys.stderr)
        else:
            print(f"  fallback calls/step {before['fallback_calls_per_step']:.0f} -> {after['fallback_calls_per_step']:.0f}, "
                  f"bytes/step {before['fallback_bytes_moved_per_step']} -> {after['fallback_bytes_moved_per_step']}; "
                  f"fastest step {before['step_time_ms_min']:.1f} -> {after['step_time_ms_min']:.1f} ms "
                  f"({row['speedup']:.2f}x)", file=sys.stderr, flush=True)
    document = {
        "benchmark": "replacements",
        "device": "emulated-dml (torch-directml 0.2.5.dev240914 op set, kernels on the host CPU)",
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "steps": args.steps,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "note": "kernels run on the host CPU of a shared 2-core machine, where a fallback costs only a memcpy: "
                "fallback calls and bytes carry over to DirectML exactly, step times do not",
        "models": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
