"""What ``scan --target dml --confirm`` costs: the prediction alone, then with every call signature of its step
replayed on real torch-directml, with the shader caches cold (empty) and warm (filled by the cold run).

    . ~/.cache/realdml/env.sh
    ~/.cache/dmlprof/venv-torch2.4.1/bin/python benchmarks/confirm_cost.py [--models resnet18 gpt2_small]

Each figure is one run of ``python -m dmlprof scan`` in its own process (what a user waits for, imports
included), on this machine, under realdml (torch-directml 0.2.5 on lavapipe: every kernel runs on the CPU,
so these are a CPU's seconds). The caches (vkd3d-proton's and Mesa's) are fresh temporary folders, so the
cold figure is cold whatever ran before. Writes benchmarks/results/confirm_cost-<adapter class>.json.
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
MODELS = {"resnet18": REPO / "models" / "resnet18.py", "gpt2_small": REPO / "benchmarks" / "models" / "gpt2_small.py",
          "groupnorm_net": REPO / "models" / "groupnorm_net.py", "lenet5": REPO / "models" / "lenet5.py"}


def _load():
    """The 1-minute load average (the machine is shared: a figure taken under load says so), None where unknown."""
    return round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None


def one_scan(model: Path, env: dict, confirm: bool, out: Path) -> dict:
    command = [sys.executable, "-m", "dmlprof", "scan", str(model), "--target", "dml", "--out", str(out),
               "--no-progress", "--quiet"] + (["--confirm"] if confirm else [])
    load_before = _load()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=out.parent, timeout=3600)
    wall_s = time.perf_counter() - started
    found = {"wall_s": round(wall_s, 1), "exit": done.returncode, "load_average_before_after": [load_before, _load()]}
    confirmations = sorted(out.glob("*.confirm.json"))
    if confirm and confirmations:
        document = json.loads(confirmations[-1].read_text(encoding="utf-8"))
        found.update(replay_s=document["seconds"], signatures=document["signatures"],
                     contradicted=document["contradicted"], workers=document["workers"], adapter=document["adapter"])
    elif done.returncode:
        found["stderr"] = done.stderr[-600:]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["resnet18", "gpt2_small"], choices=sorted(MODELS))
    args = parser.parse_args(argv)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="dmlprof-confirm-cost-") as scratch:
        scratch = Path(scratch)
        for name in args.models:
            caches = scratch / f"{name}-caches"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                   "VKD3D_SHADER_CACHE_PATH": str(caches / "vkd3d"), "MESA_SHADER_CACHE_DIR": str(caches / "mesa")}
            (caches / "vkd3d").mkdir(parents=True)
            row = {"prediction_only": one_scan(MODELS[name], env, False, scratch / f"{name}-plain")}
            row["confirm_cold"] = one_scan(MODELS[name], env, True, scratch / f"{name}-cold")
            row["confirm_warm"] = one_scan(MODELS[name], env, True, scratch / f"{name}-warm")
            results[name] = row
            print(name, json.dumps(row), flush=True)
    adapter = next((r["confirm_warm"].get("adapter", "") for r in results.values()), "")
    document = {"benchmark": "confirm_cost", "date": time.strftime("%Y-%m-%d"), "machine":
                f"{platform.machine()}, {os.cpu_count()} cores (shared)", "python": platform.python_version(),
                "adapter": adapter, "models": results,
                "note": "wall_s: the whole command (prediction, replay, reports); replay_s: the replay alone"}
    tag = "realdml" if "llvmpipe" in adapter or "lavapipe" in adapter else "directml"
    path = REPO / "benchmarks" / "results" / f"confirm_cost-{tag}.json"
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
