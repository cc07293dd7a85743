"""How long the emulated DirectML extension takes to build cold, and to load warm.

Each measurement runs in a fresh interpreter with DMLPROF_TORCH_EXTENSIONS_DIR
pointed at an empty temporary folder (cold: compile + link + load), then again
at the same folder (warm: ninja finds nothing to do, the library is loaded).
Run it for each interpreter CI uses:

    python benchmarks/emulated_build.py \\
        --python python --python ~/.cache/dmlprof/venv-torch2.4.1/bin/python

Writes benchmarks/results/emulated_build.json. Target (issue 4): a cold build
adds under 3 minutes to CI, a warm one nothing to speak of.
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

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "emulated_build.json"
TARGET_COLD_S = 180.0

_CHILD = (
    "import json, time, torch\n"
    "start = time.perf_counter()\n"
    "from dmlprof import testing\n"
    "testing.load()\n"
    "load_s = time.perf_counter() - start\n"
    "x = torch.ones(2).to('privateuseone')\n"
    "print(json.dumps({'torch': torch.__version__, 'load_s': load_s, 'built': sorted(p.name for p in"
    " testing.build_directory().glob('*.so')) + sorted(p.name for p in testing.build_directory().glob('*.pyd'))}))\n"
)


def measure(python: str, build_root: Path) -> dict:
    env = dict(os.environ, DMLPROF_TORCH_EXTENSIONS_DIR=str(build_root))
    start = time.perf_counter()
    done = subprocess.run([python, "-c", _CHILD], capture_output=True, text=True, env=env, cwd=str(REPO))
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{python}: {done.stderr.strip()[-2000:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    return {"torch": child["torch"], "load_s": round(child["load_s"], 2), "process_wall_s": round(wall_s, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help="interpreter to measure (repeatable; default: this one)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runs = []
    for python in args.python or [sys.executable]:
        python = os.path.expanduser(python)
        with tempfile.TemporaryDirectory(prefix="dmlprof-ext-") as tmp:
            cold = measure(python, Path(tmp))
            warm = measure(python, Path(tmp))
        runs.append({"python": python, "torch": cold["torch"], "cold": cold, "warm": warm,
                     "cold_build_s": round(cold["load_s"] - warm["load_s"], 2)})
        print(f"torch {cold['torch']}: cold load {cold['load_s']} s (process {cold['process_wall_s']} s), "
              f"warm load {warm['load_s']} s (process {warm['process_wall_s']} s)")
    total_cold_s = round(sum(r["cold"]["load_s"] for r in runs), 2)
    result = {
        "benchmark": "emulated_build",
        "what": "testing.load() in a fresh interpreter: cold = empty extension cache, warm = same cache again",
        "host": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "runs": runs,
        "ci_cold_total_s": total_cold_s,
        "target_cold_total_s": TARGET_COLD_S,
        "meets_target": total_cold_s < TARGET_COLD_S,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"CI cold total {total_cold_s} s (target < {TARGET_COLD_S} s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
