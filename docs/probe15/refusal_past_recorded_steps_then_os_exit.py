"""Re-probe 15: a call the device refuses after the recorded steps (`--run-to-end`), then os._exit(0), passes `check`.

A training script catches a failing spectral feature at step 10 (past the recorded window) and goes on; it ends with
os._exit(0), as scripts do to skip a hanging teardown. On real DirectML the process dies at the rfft (SIGABRT).

    PYTHONPATH=. python -m dmlprof check docs/probe15/refusal_past_recorded_steps_then_os_exit.py --target dml \
        --from cuda --run-to-end

"caught: RuntimeError", "note: ... ended its process with os._exit(0) ..., after its recorded steps", "check ...
passed", exit 0. With `-- normal` (the same script ending through Python) exit 4 and the refusal's line ("the emulated
device raised its error in its place in a step nothing recorded"): the refusal is kept only in the device's note,
read when the run ends through Python, never journaled; the same gap as refusal_in_thread_then_os_exit.py.
"""
import os
import sys

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
    print("loss", step, round(loss.item(), 4), flush=True)
if sys.argv[1:] != ["normal"]:
    os._exit(0)
