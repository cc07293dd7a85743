"""What a recording can cost: a script that never takes an optimizer step, scanned whole under default flags.

A script that never steps (an eval loop, a data pipeline) is recorded from start to end. Before the caps,
1,000,000 calls of ``x.add_(1)`` piled up ~23 KB a call under torch.profiler and ended in a MemoryError.
Now torch.profiler stops past ``PROFILED_CALLS_MAX`` calls and the recorder keeps at most
``MAX_RECORDED_CALLS``; this measures the peak resident memory and wall time of ``dmlprof scan`` on such
a script (one subprocess per variant, its peak RSS read from the kernel when it ends), and checks that the
report and the session came out and say what was left out.

    python benchmarks/recording_bound.py [--calls 1000000] [--variants default,no-profiler]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "recording_bound.json"
SCRIPT = """\
import torch
x = torch.zeros(1)
for _ in range({calls}):
    x.add_(1)
print("sum", float(x))
"""
VARIANTS = {"default": [], "no-profiler": ["--no-profiler"]}


def run_variant(calls: int, flags: list, folder: Path) -> dict:
    """One ``dmlprof scan`` of the step-less script: wall time, peak RSS, and what the session holds."""
    script = folder / "loop.py"
    script.write_text(SCRIPT.format(calls=calls), encoding="utf-8")
    out = folder / "reports"
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONIOENCODING="utf-8")
    started = time.perf_counter()
    pid = os.fork() if hasattr(os, "fork") else None
    if pid == 0:  # a child of our own, so that RUSAGE_CHILDREN holds this scan's peak alone
        done = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(script), "--out", str(out),
                               "--json", str(folder / "r.json"), "--quiet", *flags], env=env,
                              capture_output=True, text=True)
        (folder / "rc").write_text(f"{done.returncode}\n{done.stderr[-3000:]}", encoding="utf-8")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        (folder / "peak").write_text(str(peak), encoding="utf-8")
        os._exit(0)
    os.waitpid(pid, 0)
    wall_s = time.perf_counter() - started
    code, stderr = (folder / "rc").read_text(encoding="utf-8").split("\n", 1)
    (session_path,) = out.glob("*.session.json")
    session = json.loads(session_path.read_text(encoding="utf-8"))
    report = json.loads((folder / "r.json").read_text(encoding="utf-8"))
    return {
        "flags": flags, "exit_code": int(code), "wall_s": round(wall_s, 1),
        "peak_rss_mib": round(int((folder / "peak").read_text()) / 1024, 1),  # ru_maxrss is in KiB on Linux
        "session_calls": len(session["ops"].get("seq", [])), "session_mib": round(session_path.stat().st_size / 2**20, 1),
        "report_op_calls": report["summary"]["op_calls"], "notes": session["meta"].get("notes", []),
        "stderr_tail": stderr.strip().splitlines()[-3:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--variants", default="default,no-profiler")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from dmlprof.record.profiler import PROFILED_CALLS_MAX
    from dmlprof.record.recorder import MAX_RECORDED_CALLS

    results = {}
    for name in args.variants.split(","):
        with tempfile.TemporaryDirectory() as folder:
            results[name] = run_variant(args.calls, VARIANTS[name], Path(folder))
            print(name, json.dumps(results[name]), flush=True)
    document = {
        "benchmark": "recording_bound", "script": "x.add_(1) in a loop, no optimizer step (recorded whole)",
        "calls": args.calls, "max_recorded_calls": MAX_RECORDED_CALLS, "profiled_calls_max": PROFILED_CALLS_MAX,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "python": platform.python_version(), "variants": results,
    }
    import torch

    document["torch"] = torch.__version__
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
