"""Distributed runs (issue 17): dmlprof's per-rank figures against torch.profiler's own per-rank traces.

Two ranks over gloo (on a GPU machine both ranks share the one GPU: NCCL wants a GPU per rank):

1. same run: ``dmlprof scan --nproc 2`` of a model file (LeNet-5) and, under torchrun, of a plain
   DDP script; each rank's merged-report figures against torch.profiler's trace of that very rank
   and run (RUN_DIR/profiler/rank<N>.pt.trace.json): median step (the iteration period, from one
   last op inside one ``Optimizer.step#`` range to the same in the next; the same steps, mean), total
   collective time (``gloo:*`` ranges),
   and on CUDA the kernel time joined to calls against all kernel time in the trace;
2. separate runs: the same DDP script under torch.profiler alone (no dmlprof) against the dmlprof
   run of it: per rank, median step and collective time per step. This ratio holds recording
   overhead and run-to-run noise, not only accounting.

    python benchmarks/distributed.py --device cpu  --out benchmarks/results/distributed_cpu.json
    python benchmarks/distributed.py --device cuda --out benchmarks/results/nvidia_h200/distributed.json
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "models" / "lenet5.py"
SCRIPT = REPO / "tests" / "fixtures" / "ddp_train.py"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                PYTHONIOENCODING="utf-8")


def _run(argv, cwd) -> None:
    result = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed ({result.returncode}): {result.stderr[-3000:]}")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def optimizer_ends(events: list) -> list:
    """Per ``Optimizer.step#`` range, in order: the end of the last ``aten::`` op inside it (the range's
    own end also holds its post-hooks, whose time a loaded machine makes vary)."""
    ends = []
    for step in sorted((e for e in events if e["name"].startswith("Optimizer.step#")), key=lambda e: e["ts"]):
        inside = [e["ts"] + e["dur"] for e in events if e["tid"] == step["tid"] and e["name"].startswith("aten::")
                  and step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"]]
        ends.append(max(inside, default=step["ts"] + step["dur"]))
    return ends


def trace_figures(path: Path, after_first_step: bool = False) -> dict:
    """What torch.profiler's own trace of one rank says (collectives after the first optimizer step
    only, with ``after_first_step``: a script's set-up and warm-up step are not recorded by dmlprof)."""
    trace = json.loads(Path(path).read_text(encoding="utf-8"))
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    # On CUDA each host range is also drawn on the GPU timeline (``gpu_user_annotation``, same name):
    # steps are read from the host's ranges only, or every step would count twice.
    ends = optimizer_ends([e for e in events if not str(e.get("cat", "")).startswith("gpu_")])
    periods = [(b - a) / 1000 for a, b in zip(ends, ends[1:])]
    since = ends[0] if after_first_step and ends else float("-inf")
    comm = [e["dur"] / 1000 for e in events if e["name"].startswith(("gloo:", "nccl:")) and e["ts"] >= since]
    kernels = sum(e["dur"] for e in events if e.get("cat") == "kernel") / 1000
    return {"periods_ms": periods, "step_ms": statistics.median(periods) if periods else None, "comm_ms": sum(comm),
            "comm_ms_per_step": sum(comm) / max(1, len(periods)), "kernel_ms": kernels,
            "distributedInfo": trace.get("distributedInfo")}


def _ratio(ours, theirs):
    return round(ours / theirs, 4) if ours is not None and theirs else None


def same_run(folder: Path, report: dict, script: bool) -> list:
    """Per rank: dmlprof's merged figures over the profiler's trace of the same rank and run."""
    rows = []
    for rank in report["ranks"]:
        theirs = trace_figures(folder / "profiler" / f"rank{rank['rank']}.pt.trace.json", script)
        # the same steps, in order: a model file's trace starts at measured step 1's period; a script's
        # first period is its recorded step 0, which has no time in the report
        steps = rank["step_times_ms"] if script else rank["step_times_ms"][1:]
        periods = theirs["periods_ms"][1:] if script else theirs["periods_ms"]
        matched = min(len(steps), len(periods))
        ours_step = sum(steps[:matched]) / matched
        theirs["step_ms"] = sum(periods[:matched]) / matched
        ours_comm = sum(c["comm_time_ms"] or 0 for c in report["collectives"] if c["rank"] == rank["rank"])
        session = json.loads((folder / f"rank{rank['rank']}.session.json").read_text(encoding="utf-8"))
        kernel = sum(t for t in session["ops"]["device_time_ns"] if t) / 1e6
        rows.append({"rank": rank["rank"], "steps_compared": matched, "dmlprof_step_ms": round(ours_step, 3),
                     "profiler_step_ms": round(theirs["step_ms"], 3),
                     "step_ratio": _ratio(ours_step, theirs["step_ms"]), "dmlprof_comm_ms": round(ours_comm, 3),
                     "profiler_comm_ms": round(theirs["comm_ms"], 3), "comm_ratio": _ratio(ours_comm, theirs["comm_ms"]),
                     "dmlprof_kernel_ms": round(kernel, 3), "profiler_kernel_ms": round(theirs["kernel_ms"], 3),
                     "kernel_ratio": _ratio(kernel, theirs["kernel_ms"]) if theirs["kernel_ms"] else None,
                     "distributedInfo": theirs["distributedInfo"]})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "distributed_cpu.json"))
    args = parser.parse_args()
    import torch

    result = {"device": args.device, "torch": torch.__version__, "ranks": 2, "process_group": "gloo",
              "steps": args.steps, "device_name": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # 1a. a model file through dmlprof scan --nproc 2
        _run([sys.executable, "-m", "dmlprof", "scan", MODEL, "--nproc", "2", "--device", args.device, "--dist-backend",
              "gloo", "--batch-size", "16", "--steps", str(args.steps), "--out", tmp / "contract", "--json",
              tmp / "contract.json", "--quiet"], cwd=tmp)
        folder = next((tmp / "contract").iterdir())
        result["contract_same_run"] = same_run(folder, json.loads((tmp / "contract.json").read_text()), False)
        # 1b. a plain DDP script under torchrun -m dmlprof scan
        _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(_port()),
              "-m", "dmlprof", "scan", SCRIPT, "--device", args.device, "--out", tmp / "script", "--json",
              tmp / "script.json", "--quiet", "--", "--steps", str(args.steps + 1), "--device", args.device], cwd=tmp)
        folder = next((tmp / "script").iterdir())
        script_report = json.loads((tmp / "script.json").read_text())
        result["script_same_run"] = same_run(folder, script_report, True)
        # 2. the same script under torch.profiler alone
        _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(_port()),
              SCRIPT, "--steps", str(args.steps + 1), "--device", args.device, "--profile-trace",
              str(tmp / "plain{rank}.json")], cwd=tmp)
        rows = []
        for rank in script_report["ranks"]:
            plain = trace_figures(tmp / f"plain{rank['rank']}.json", after_first_step=True)
            ours_step = statistics.median(rank["step_times_ms"])
            ours_comm = statistics.median(rank["comm_times_ms"]) if rank["comm_times_ms"] else None
            rows.append({"rank": rank["rank"], "dmlprof_step_ms": round(ours_step, 3),
                         "plain_profiler_step_ms": round(plain["step_ms"], 3), "step_ratio": _ratio(ours_step, plain["step_ms"]),
                         "dmlprof_comm_ms_per_step": ours_comm, "plain_profiler_comm_ms_per_step": round(plain["comm_ms_per_step"], 3),
                         "comm_ratio": _ratio(ours_comm, plain["comm_ms_per_step"])})
        result["script_vs_plain_profiler_run"] = rows
    result["notes"] = [
        "same_run: the merged report's figures over torch.profiler's trace of the same rank and run; "
        "steps are iteration periods (Optimizer.step end to end), comm the gloo:* ranges, kernels the trace's kernel events",
        "script_vs_plain_profiler_run: a separate run under torch.profiler alone; the ratio holds dmlprof's recording "
        "overhead (a Python dispatch hook per op call) and run-to-run noise",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
