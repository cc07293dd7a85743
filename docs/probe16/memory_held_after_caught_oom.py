"""Re-probe 16: under a scan, memory of a caught out-of-memory attempt stays held, so the script's batch-size
finder picks a 16x smaller batch, or the run ends with exit 4 where plain python finishes.

    python docs/probe16/memory_held_after_caught_oom.py --driver

runs the script below under a 3.5 GB address-space limit (`ulimit -v`, as cluster schedulers set it) plainly,
then under `python -m dmlprof scan THIS --device cpu --run-to-end --no-profiler` (supervised and with
DMLPROF_NO_SUPERVISOR=1: the same), and prints each run's chosen batch and exit code. Measured (torch 2.13,
2026-12-07): plain "batch 1048576" (exit 0); under dmlprof "batch 65536" (with the profiler, --device cpu
--from cuda: "batch 16384", then exit 4 "the process ran out of host memory allocating 4.0 MiB"); the
resident memory at each later failure grows 2.46 -> 2.72 -> 2.86 GB, where plain python's is freed. Dropping a
tensor after a caught error is freed under dmlprof in simpler cases (a failed op, a failed module forward, a
failed backward) once `gc.collect()` runs: the hold is a reference cycle, and with a `gc.collect()` after
each attempt the scan picks plain python's batch. The cycle seems to be dmlprof/record/recorder.py's `raise
failed` (the frame holding the exception and the call's arguments is in the exception's traceback).
"""
import resource
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def rss_mb():
    with open("/proc/self/status") as status:
        return [int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS")][0]


def find_batch_and_train():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    bs = 2 ** 24
    while True:
        try:
            x = torch.randn(bs, 64)
            loss = F.cross_entropy(model(x), torch.zeros(bs, dtype=torch.long))
            loss.backward()
            break
        except RuntimeError:
            print("OOM at batch", bs, "rss MB", rss_mb(), flush=True)
            opt.zero_grad(set_to_none=True)
            x = loss = None
            bs //= 4
    print("batch", bs, flush=True)
    for _ in range(4):
        x = torch.randn(bs, 64)
        loss = F.cross_entropy(model(x), torch.randint(0, 2, (bs,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("final loss", round(loss.item(), 4))


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (3_500_000 * 1024, 3_500_000 * 1024))


def driver():
    runs = {"plain": [sys.executable, __file__],
            "dmlprof": [sys.executable, "-m", "dmlprof", "scan", __file__, "--device", "cpu", "--run-to-end",
                        "--no-profiler", "--out", "/tmp/probe16_repro_reports"]}
    for name, cmd in runs.items():
        done = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit_memory, timeout=900)
        picked = [line for line in done.stdout.splitlines() if line.startswith(("OOM", "batch", "final"))]
        print(f"{name}: exit {done.returncode}; " + "; ".join(picked) + " " + done.stderr.strip()[-200:])


if __name__ == "__main__":
    driver() if "--driver" in sys.argv else find_batch_and_train()
