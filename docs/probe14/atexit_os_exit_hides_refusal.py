"""Re-probe 14, case 25: an atexit handler ending the process with os._exit(0) turns a refused call into a pass.

Scripts register `atexit.register(os._exit, 0)` (or a lambda doing it) to skip a teardown that hangs (DataLoader
workers, NCCL, threads). On real DirectML this script dies at its first torch.fft.rfft (SIGABRT: complex tensors
abort torch-directml; no atexit handler runs). Plainly on the CPU it prints 4 losses, exit 0.

    PYTHONPATH=. python -m dmlprof check docs/probe14/atexit_os_exit_hides_refusal.py --target dml --from cuda

prints no loss, "note: ... ended its process with os._exit(0)", then "check ... passed", "ok calls on the device 4",
exit 0: dmlprof's guard refuses the rfft by raising, the exception unwinds the script, the atexit handler's
os._exit(0) is read as the script's success, and the refusal is nowhere in the report or the exit status.

The model-file form (docs/probe14/atexit_os_exit_model.py, `check` or `scan --target dml`) prints the refusal's error
line and still exits 0 (documented: 4), so CI sees success.
"""
import atexit
import os

import torch
import torch.nn as nn

atexit.register(os._exit, 0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Linear(5, 2).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn(4, 8, device=dev)
    loss = m(torch.fft.rfft(x).abs()).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, round(loss.item(), 4))
