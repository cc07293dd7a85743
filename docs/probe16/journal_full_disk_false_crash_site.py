"""Re-probe 16: when the journal's folder fills up, a crash (or an os._exit) later in the run is reported as
happening in the last call journaled, steps earlier.

    python docs/probe16/journal_full_disk_false_crash_site.py --driver

The driver mounts a 256 KiB tmpfs (needs root; or give a folder on a nearly full disk as PROBE16_FULL_DIR)
and runs, with TMPDIR there (where the journal goes when TMPDIR is set):
  python -m dmlprof scan THIS --device emulated-dml --steps 40            (CRASH_AT=30: segfault at step 30)
Expected: exit 7 "died of SIGSEGV at journal_full_disk_false_crash_site.py:NN" (the ctypes line), or a line
saying the journal stopped at call N (disk full) and the crash site is unknown. Got (2026-12-07, torch 2.13):
exit 7 "the scanned process died of SIGSEGV in aten::gelu_backward (float32 [16, 32], [16, 32]; in
Sequential.5.2)" (another run: "in aten::addmm ...; in Sequential.5.0": whichever call filled the folder), "19 optimizer steps taken: 18 recorded" (30 were taken), no word of the full journal; with
os._exit(0) in place of the crash (EXIT_AT=30): "ended abruptly (abort(), ...) in aten::addmm", exit 0.
A run that ends normally there is whole (40 steps), so only salvage is misled. On Windows, a full C: drive.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F


def train():
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(32, 32), nn.LayerNorm(32), nn.GELU()) for _ in range(6)]
    model = nn.Sequential(*blocks, nn.Linear(32, 4)).to("privateuseone")
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    crash_at = int(os.environ.get("CRASH_AT", "100000"))
    exit_at = int(os.environ.get("EXIT_AT", "100000"))
    for step in range(200):
        if step == crash_at:
            ctypes.string_at(0)            # the crash: this line
        if step == exit_at:
            os._exit(0)
        x = torch.randn(16, 32, device="privateuseone")
        y = torch.randint(0, 4, (16,), device="privateuseone")
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def driver():
    folder = os.environ.get("PROBE16_FULL_DIR")
    if not folder:
        folder = tempfile.mkdtemp(prefix="probe16-tiny-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", folder], check=True)
    try:
        for variable in ("CRASH_AT", "EXIT_AT"):
            env = dict(os.environ, TMPDIR=folder, **{variable: "30"})
            done = subprocess.run([sys.executable, "-m", "dmlprof", "scan", __file__, "--device", "emulated-dml",
                                   "--steps", "40", "--out", tempfile.mkdtemp(prefix="probe16-reports-")],
                                  env=env, capture_output=True, text=True, timeout=900)
            taken = [line for line in done.stdout.splitlines() if "optimizer steps taken" in line]
            print(f"{variable}=30: exit {done.returncode}; {taken[0].strip() if taken else ''}\n  "
                  f"{done.stderr.strip().splitlines()[-1]}")
    finally:
        if not os.environ.get("PROBE16_FULL_DIR"):
            subprocess.run(["umount", folder])


if __name__ == "__main__":
    driver() if "--driver" in sys.argv else train()
