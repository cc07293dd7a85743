"""The accelerator suite (issue 8): every model scanned, ResNet-18 swept, recording overhead.

Run on a machine with a GPU; writes one summary file per part under
--out (default benchmarks/results/<gpu name>/):

    python benchmarks/gpu_suite.py --device cuda

- scans.json: for every model in models/, a scan with per-op sync and one with
  --no-sync: op calls, median step time, host and device (kernel) time, the
  kernel-time check (kernel time joined to calls / all kernel time the
  profiler saw), the profiler cross-check, copies, syncs and CPU-tensor calls.
- overhead_bs8.json, overhead_bs64.json: benchmarks/overhead.py on ResNet-18.
- sweep.json: `dmlprof sweep models/resnet18.py`.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def scan_summary(session) -> dict:
    import pandas as pd

    from dmlprof import analysis

    ops, meta = session.ops, session.meta.to_dict()
    head = analysis.summary(ops)
    steps = meta.get("step_times_ms") or []
    transfers = analysis.transfer_hotspots(ops)
    return {
        "op_calls": head["op_calls"],
        "op_calls_per_step": head["op_calls"] // max(1, meta.get("steps") or 1),
        "median_step_ms": round(statistics.median(steps), 3) if steps else None,
        "host_op_time_ms": round(head["time_ms"], 3),
        "device_kernel_time_ms": head["device_time_ms_on_device"],
        "device_time_check": meta.get("device_time_check"),
        "profiler_check": meta.get("profiler_check"),
        "recording": meta.get("recording"),
        "steady_state": meta.get("steady_state"),
        "cpu_calls": head["cpu_calls"],
        "fallback_calls": head["fallback_calls"],
        "transfers": [
            {"op": r.op, "transfer": r.transfer, "calls": int(r.calls), "bytes_moved": int(r.bytes_moved),
             "time_ms": round(float(r.time_ms), 3), "sources": list(r.sources)}
            for r in transfers.itertuples()
        ],
        "top_ops": [
            {"op": r.op, "phase": r.phase, "calls": int(r.calls), "host_ms": round(float(r.time_ms), 3),
             "device_ms": None if pd.isna(r.device_time_ms) else round(float(r.device_time_ms), 3)}
            for r in analysis.op_summary(ops).head(8).itertuples()
        ],
    }


def main(argv=None) -> int:
    import torch

    import dmlprof
    from dmlprof.backends import resolve_backend

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: scans,overhead,sweep")
    args = parser.parse_args(argv)
    backend = resolve_backend(args.device)
    gpu = re.sub(r"[^A-Za-z0-9]+", "_", backend.device_name()).strip("_").lower()
    out = Path(args.out or REPO / "benchmarks" / "results" / gpu)
    out.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    environment = {"device_name": backend.device_name(), "torch_version": torch.__version__,
                   "backend": backend.name, "backend_versions": backend.versions()}

    if "scans" not in skip:
        scans = {}
        for model in sorted((REPO / "models").glob("*.py")):
            entry = {}
            for label, sync in (("sync", True), ("no_sync", False)):
                session = dmlprof.scan(model, backend.name, steps=5, warmup=2, sync=sync, backend=backend)
                entry[label] = scan_summary(session)
                print(f"{model.name} {label}: {entry[label]['median_step_ms']} ms/step, "
                      f"kernel check {entry[label]['device_time_check']}", flush=True)
            scans[model.name] = entry
        (out / "scans.json").write_text(json.dumps({**environment, "scans": scans}, indent=2) + "\n", encoding="utf-8")

    if "overhead" not in skip:
        for batch_size in (8, 64):
            subprocess.run([sys.executable, str(REPO / "benchmarks" / "overhead.py"), "--device", backend.name,
                            "--batch-size", str(batch_size), "--rounds", "6", "--steps", "8",
                            "--out", str(out / f"overhead_bs{batch_size}.json")], check=True)

    if "sweep" not in skip:
        with tempfile.TemporaryDirectory() as scratch:
            subprocess.run([sys.executable, "-m", "dmlprof", "sweep", str(REPO / "models" / "resnet18.py"),
                            "--device", backend.name, "--batch-sizes", "8,16,32,64,128,256,512",
                            "--no-progress", "--out", scratch, "--json", str(out / "sweep.json")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
