"""Predict vs emulate, per zoo model: how long ``--target dml`` takes against ``--device emulated-dml``.

Each zoo model file (tests/zoo/models) is scanned through the real CLI in
fresh processes, the same step window both ways (1 warm-up + 2 measured
steps, the zoo tests' window), with dmlprof's defaults otherwise:

    dmlprof scan MODEL --target dml            --warmup 1 --steps 2 --quiet
    dmlprof scan MODEL --device emulated-dml   --warmup 1 --steps 2 --quiet

and writes benchmarks/results/zoo_times.json: per model the median wall and
CPU time (user + system) of each, and their ratio. Prediction must stay
faster than emulation (``predict_over_emulated_cpu`` < 1): it runs no kernels.

    python benchmarks/zoo_times.py [--runs 3] [MODEL.py ...]

Models whose packages are missing are listed as skipped; a scan that fails is
recorded with its error line.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "zoo"))

from zoo_harness.entries import WINDOW, discover  # noqa: E402

MODES = {"predicted": ["--target", "dml"], "emulated": ["--device", "emulated-dml"]}


def _env() -> dict:
    env = dict(os.environ, PYTHONIOENCODING="utf-8", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def measure(path: Path, mode: str) -> dict:
    """One fresh process: wall time, CPU time, exit code, the session's own duration."""
    import resource  # POSIX: this benchmark measures on Linux

    with tempfile.TemporaryDirectory(prefix="zoo-times-") as out:
        command = [sys.executable, "-m", "dmlprof", "scan", str(path), *MODES[mode], "--warmup", str(WINDOW[0]),
                   "--steps", str(WINDOW[1]), "--quiet", "--out", out]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", errors="replace",
                              env=_env(), cwd=out)
        wall_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        sessions = sorted(Path(out).glob("*.session.json"))
        session = json.loads(sessions[0].read_text(encoding="utf-8")) if sessions else {"meta": {}, "ops": {}}
    error = done.stderr.strip().splitlines()[-1][:300] if done.returncode and done.stderr.strip() else None
    return {"wall_s": round(wall_s, 3),
            "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3),
            "exit_code": done.returncode, "error": error, "partial": bool(session["meta"].get("partial")),
            "calls": len((session.get("ops") or {}).get("op") or []),
            "load_average_1m": round(os.getloadavg()[0], 2)}


def _median(runs: list, key: str) -> float:
    values = sorted(r[key] for r in runs)
    return values[len(values) // 2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", type=Path, help="model files (default: every zoo model file)")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("ZOO_TIMES_RUNS", "3")))
    args = parser.parse_args(argv)
    entries = [e for e in discover([ROOT / "tests" / "zoo" / "models"]) if e.kind == "contract"]
    if args.models:
        wanted = {p.resolve() for p in args.models}
        entries = [e for e in entries if e.path in wanted]
    models, skipped = {}, {}
    for entry in entries:
        if entry.missing():
            skipped[entry.name] = f"needs {', '.join(entry.missing())}"
            continue
        runs = {mode: [measure(entry.path, mode) for _ in range(args.runs)] for mode in MODES}
        row = {}
        for mode, mode_runs in runs.items():
            row[mode] = {"wall_s": _median(mode_runs, "wall_s"), "cpu_s": _median(mode_runs, "cpu_s"),
                         "error": next((r["error"] for r in mode_runs if r["error"]), None),
                         "runs": mode_runs}
        both_ran = not row["predicted"]["error"] and not row["emulated"]["error"]
        row["predict_over_emulated_cpu"] = (round(row["predicted"]["cpu_s"] / row["emulated"]["cpu_s"], 3)
                                            if both_ran else None)
        row["predict_over_emulated_wall"] = (round(row["predicted"]["wall_s"] / row["emulated"]["wall_s"], 3)
                                             if both_ran else None)
        models[entry.name] = row
        print(f"{entry.name:22s} predicted {row['predicted']['cpu_s']:7.2f} s CPU  emulated "
              f"{row['emulated']['cpu_s']:7.2f} s CPU  ratio {row['predict_over_emulated_cpu']}", file=sys.stderr)
    import torch

    ratios = [m["predict_over_emulated_cpu"] for m in models.values() if m["predict_over_emulated_cpu"] is not None]
    result = {
        "benchmark": "zoo_times",
        "what_is_measured": "per zoo model file, median over fresh processes of `dmlprof scan MODEL --target dml` "
                            "and `--device emulated-dml` (each: interpreter start, imports, building the model, "
                            f"{WINDOW[0]} warm-up + {WINDOW[1]} measured steps, saving the session); cpu_s is user + "
                            "system time, less sensitive than wall time to other work on the machine",
        "target": "prediction faster than emulation: predict_over_emulated_cpu < 1 for every model",
        "meets_target": bool(ratios) and all(r < 1 for r in ratios) and len(ratios) == len(models),
        "models": models,
        "skipped": skipped,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    out = ROOT / "benchmarks" / "results" / "zoo_times.json"
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
