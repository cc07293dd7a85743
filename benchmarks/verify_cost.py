"""What ``scan --verify`` costs against a plain scan of the same steps.

Per model and device, one training step is built once; then plain scans and
verified scans (scan's own code, ``scan_training_step``, default settings:
per-op sync, torch.profiler alongside) alternate in rounds so drift on a noisy
machine hits both alike. The figures are ratios of medians: the whole scan's
wall time (what a user waits for) and the median measured step time the scan
reports. The target is at most 3x.

    python benchmarks/verify_cost.py [--devices emulated-dml cpu] [--batch-size 8] [--steps 2] [--rounds 3]

Writes benchmarks/results/verify_cost.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dmlprof.backends import resolve_backend  # noqa: E402
from dmlprof.runner import ScanStopped, TrainingStep, scan_training_step  # noqa: E402

DEFAULT_MODELS = ["lenet5", "resnet18", "vit_tiny", "groupnorm_net", "recommender", "lstm_forecaster"]
TARGET_RATIO = 3.0


def one_scan(training, backend, path, steps: int, verify: bool) -> dict:
    started = time.perf_counter()
    try:
        session = scan_training_step(training, backend, path, steps=steps, warmup=0, verify=verify)
    except ScanStopped as stopped:
        return {"partial": True, "reason": str(stopped).splitlines()[0][:160]}
    wall_s = time.perf_counter() - started
    step_ms = statistics.median(session.meta.to_dict()["step_times_ms"])
    checked = session.extras.get("verify", {}).get("checked_calls") if verify else None
    divergent = session.extras.get("verify", {}).get("divergent_calls") if verify else None
    return {"partial": False, "wall_s": wall_s, "step_ms": step_ms, "calls": int(len(session.ops)),
            "checked_calls": checked, "divergent_calls": divergent}


def measure(model: str, device: str, batch_size: int, steps: int, rounds: int) -> dict:
    backend = resolve_backend(device)
    path = REPO / "models" / f"{model}.py"
    training = TrainingStep.from_file(path, backend, batch_size)
    try:  # warm-up: allocator, kernels, lazily built state (momentum buffers)
        training.run()
        backend.synchronize()
    except Exception as exc:  # the step cannot complete on this device (nn.LSTM on DirectML)
        return {"model": model, "device": device, "skipped": f"the step fails here: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:160]}"}
    plain, verified = [], []
    for _ in range(rounds):
        plain.append(one_scan(training, backend, path, steps, verify=False))
        verified.append(one_scan(training, backend, path, steps, verify=True))
    if any(r["partial"] for r in plain + verified):
        return {"model": model, "device": device, "skipped": "a scan stopped early",
                "reasons": sorted({r.get("reason", "") for r in plain + verified if r["partial"]})}
    plain_wall = statistics.median(r["wall_s"] for r in plain)
    verify_wall = statistics.median(r["wall_s"] for r in verified)
    plain_step = statistics.median(r["step_ms"] for r in plain)
    verify_step = statistics.median(r["step_ms"] for r in verified)
    return {
        "model": model, "device": device, "batch_size": batch_size, "steps": steps, "rounds": rounds,
        "op_calls_per_scan": plain[0]["calls"], "checked_calls_per_scan": verified[0]["checked_calls"],
        "divergent_calls": max(r["divergent_calls"] for r in verified),
        "plain_scan_wall_s": round(plain_wall, 3), "verify_scan_wall_s": round(verify_wall, 3),
        "wall_ratio": round(verify_wall / plain_wall, 3),
        "plain_step_ms": round(plain_step, 2), "verify_step_ms": round(verify_step, 2),
        "step_ratio": round(verify_step / plain_step, 3),
        "within_target": verify_wall / plain_wall <= TARGET_RATIO,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    parser.add_argument("--devices", nargs="+", default=["emulated-dml", "cpu"])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "verify_cost.json"))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    results = []
    for device in args.devices:
        for model in args.models:
            row = measure(model, device, args.batch_size, args.steps, args.rounds)
            results.append(row)
            print(json.dumps(row), flush=True)
    measured = [r for r in results if "wall_ratio" in r]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    report = {
        "benchmark": "verify_cost",
        "what": "scan --verify against a plain scan of the same steps (per-op sync, torch.profiler alongside); "
                "ratios of medians over alternating rounds",
        "target_ratio": TARGET_RATIO,
        "max_wall_ratio": max((r["wall_ratio"] for r in measured), default=None),
        "max_step_ratio": max((r["step_ratio"] for r in measured), default=None),
        "all_within_target": all(r["within_target"] for r in measured) if measured else None,
        "results": results,
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "platform": platform.platform(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                        "load_avg_1min_at_end": load},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"max wall ratio {report['max_wall_ratio']}, max step ratio {report['max_step_ratio']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
