"""Re-probe 15: a script that profiles a block itself (`with dmlprof.profile():`) fails when dmlprof scans it.

A project instruments its training script with dmlprof's Python API and also gates it in CI with `dmlprof check`.

    PYTHONPATH=. python -m dmlprof check docs/probe15/profile_block_inside_scan.py --target dml --from cuda
    PYTHONPATH=. python -m dmlprof scan docs/probe15/profile_block_inside_scan.py

exit 3, "profile_block_inside_scan.py raised TapUnavailable: another dmlprof recording is active in this process (at
...:NN)": read as the script's own error. Plainly (`PYTHONPATH=. python docs/probe15/profile_block_inside_scan.py`)
the block is profiled and 3 losses print, exit 0. Nothing in docs/ says a scanned script may not use the API (the
error is raised by dmlprof/record/tap.py); the inner block could run unrecorded, or be recorded by the outer scan.
"""
import torch
import torch.nn as nn

import dmlprof

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Linear(8, 2).to(dev)
with dmlprof.profile() as prof:
    m(torch.randn(4, 8, device=dev)).sum().backward()
print("block profiled:", prof.session, flush=True)
for step in range(3):
    print("loss", step, round(m(torch.randn(4, 8, device=dev)).pow(2).mean().item(), 4), flush=True)
