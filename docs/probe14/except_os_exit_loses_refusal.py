"""Re-probe 14, case 26: a refused call caught by a launch-script-style `except: ...; os._exit(1)`.

    PYTHONPATH=. python -m dmlprof check docs/probe14/except_os_exit_loses_refusal.py --target dml --from cuda

exit 3, "error: except_os_exit_loses_refusal.py exited with status 1 (os._exit) at ...:NN"; the saved session (dmlprof
report) lists aten::_fft_r2c with the verdict "device" and "Fallbacks: none - every call on device tensors ran on the
device": the refusal is gone. With `sys.exit(1)` in place of `os._exit(1)` the same check exits 4 and leads with
"complex tensors abort torch-directml ... the code caught" (issue 33's R29 fix). So the refusal is kept only where the
script ends through Python; an os._exit (here, in an atexit handler: atexit_os_exit_hides_refusal.py) drops it.
On real DirectML the script dies at the rfft (SIGABRT).
"""
import os
import sys
import traceback

import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Linear(5, 2).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
try:
    for step in range(4):
        loss = m(torch.fft.rfft(torch.randn(4, 8, device=dev)).abs()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("loss", step, round(loss.item(), 4), flush=True)
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(1)
