"""Re-probe 13 (docs/probe13.md case 19): a script that ends with os._exit(0) after training, a common way to skip
a slow teardown (DataLoader workers, NCCL). Plainly: prints "trained", exit 0.

`python -m dmlprof scan docs/probe13/script_ends_with_os_exit.py --run-to-end` exits 0 but the report keeps "no step
times nor profiler events: they are kept only when a run ends", although the recorded window (warm-up + 3 steps)
closed two steps before the exit. An atexit handler calling os._exit reads the same, and with --run-to-end also
"PARTIAL SESSION  The run stopped early" for a run that finished.
"""
import os

import torch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("trained", flush=True)
os._exit(0)
