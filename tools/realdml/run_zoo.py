"""Run the ecosystem zoo and models/ on real torch-directml; keep what happened, call by call.

    . ~/.cache/realdml/env.sh
    python tools/realdml/run_zoo.py --out tests/zoo/realdml_results.json [ENTRY.py ...]

Each entry (every zoo model file and script, and every file in models/, or the ones named) is
scanned in a process of its own on the real DirectML device, as the zoo's prediction is made
(``--warmup 1 --steps 2``, ``--from cuda`` for a CUDA script). The result per entry: the outcome
(ran, or stopped at a call DirectML refuses, with the call), and its device calls per step (op,
verdict, fallback ops), which CI compares with ``--target dml`` without needing realdml
(tests/zoo/test_realdml_zoo.py). A ResNet-50 step costs minutes of kernel compiles on lavapipe:
this runs off CI, and its results are committed with the versions and the date.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "zoo"))

from zoo_harness.entries import WINDOW, discover, read_entry  # noqa: E402
from zoo_harness.realdml import device_calls  # noqa: E402

TIMEOUT_S = 3600


def run_entry(entry, work: Path) -> dict:
    out = work / entry.name
    warmup, steps = WINDOW
    command = [sys.executable, "-m", "dmlprof", "scan", str(entry.path), "--device", "dml", "--warmup", str(warmup),
               "--steps", str(steps), "--no-profiler", "--out", str(out), "--quiet"]
    if entry.from_device:
        command += ["--from", entry.from_device]
    env = dict(os.environ, PYTHONIOENCODING="utf-8", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests" / "zoo")]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    started = time.time()
    try:
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, encoding="utf-8",
                              errors="replace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "seconds": TIMEOUT_S}
    sessions = sorted(out.glob("*.session.json"))
    session = json.loads(sessions[0].read_text(encoding="utf-8")) if sessions else {}
    meta = session.get("meta") or {}
    result = {"outcome": "ran" if done.returncode == 0 else "stopped", "exit_code": done.returncode,
              "seconds": round(time.time() - started), "command": command[3:],
              "calls": device_calls(session)}
    if meta.get("device_failure"):
        result["device_failure"] = {k: meta["device_failure"].get(k) for k in ("op", "kind", "message")}
    if done.returncode and not meta.get("device_failure"):
        result["error"] = done.stderr.strip()[-600:]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("entries", nargs="*", type=Path)
    args = parser.parse_args()
    import torch

    entries = ([read_entry(p.resolve()) for p in args.entries] if args.entries
               else discover() + discover([REPO / "models"]))
    previous = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    results = dict(previous.get("entries") or {})
    with tempfile.TemporaryDirectory() as work:
        for entry in entries:
            missing = entry.missing()
            key = str(entry.path.relative_to(REPO)).replace(os.sep, "/")
            if missing:
                print(f"{key}: skipped, needs {', '.join(missing)}", flush=True)
                continue
            results[key] = run_entry(entry, Path(work))
            print(f"{key}: {results[key]['outcome']} in {results[key].get('seconds')} s", flush=True)
            _write(args.out, results, torch.__version__)  # after each entry: a long run keeps what it measured
    return 0


def _write(path: Path, results: dict, torch_version: str) -> None:
    from importlib.metadata import version

    document = {"about": "the zoo and models/ on real torch-directml (tools/realdml/run_zoo.py, docs/realdml.md)",
                "date": datetime.date.today().isoformat(), "window": list(WINDOW),
                "versions": {"torch": torch_version, "torch_directml": version("torch-directml"),
                             "vkd3d_proton": os.environ.get("REALDML_VKD3D_PROTON", "3.0.1"),
                             "mesa": os.environ.get("REALDML_MESA", "25.0.7 (lavapipe)")},
                "entries": dict(sorted(results.items()))}
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
