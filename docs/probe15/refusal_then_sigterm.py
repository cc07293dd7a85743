"""Re-probe 15: a refused call, then the job scheduler's SIGTERM: "stopped by SIGTERM" (exit 143), the refusal lost.

A training script catches a failing spectral feature at step 10 (past the recorded window, `--run-to-end`) and goes
on; later the scheduler sends SIGTERM to the job (here the script sends it to its parent, the dmlprof that scans
it, as `kill -TERM <dmlprof's pid>` from outside does). On real DirectML the process died at the rfft (SIGABRT).

    PYTHONPATH=. python -m dmlprof check docs/probe15/refusal_then_sigterm.py --target dml --from cuda --run-to-end

"caught: RuntimeError", then "dmlprof: error: stopped by SIGTERM [partial session saved ...]", exit 143; neither the
line nor the saved session names the refusal (without the SIGTERM the run ends with exit 4 leading with it).
"""
import os
import signal
import time

import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Linear(8, 2).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(12):
    x = torch.randn(4, 8, device=dev)
    if step == 10:
        try:
            x = torch.fft.rfft(x).abs().repeat(1, 2)[:, :8]
        except RuntimeError as e:
            print("caught:", type(e).__name__, flush=True)
    loss = m(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done training; the scheduler's SIGTERM comes", flush=True)
parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read() if os.path.exists("/proc") else b""
if b"dmlprof" in parent:  # never the shell of a plain run
    os.kill(os.getppid(), signal.SIGTERM)
time.sleep(30)
