"""Re-probe 17: a write into an offset view made in a worker thread (a threaded forward: a hand-rolled
data-parallel, a pipeline stage) whose backward the main thread runs: `check` passes; real DirectML's gradient is wrong.

    PYTHONPATH=. python -m dmlprof check docs/probe17/written_view_in_worker_thread.py --target dml --from cuda

"check ... passed", exit 0 (26 calls on the device: the thread's linear, zeros and copy_ are not among them).
With `-- same` (the forward in the main thread): exit 6, "aten::copy_ ... the gradients flowing back through the
written tensor are wrong". Plainly (CPU) "grad [-7.634, -19.91]" both ways; realdml (torch 2.4.1 + torch-directml
0.2.5, `-- dml`, threaded or `-- dml same`) "grad [-4.565, -16.841]". docs/scripts.md says other threads' calls are not
recorded; nothing in the check's verdict says that a thread ran device calls it did not judge.
"""
import sys
import threading

import torch
import torch.nn as nn

if "dml" in sys.argv[1:]:
    import torch_directml
    dev = torch_directml.device()
else:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
lin = nn.Linear(8, 8).to(dev)
x = torch.arange(16.).view(2, 8).to(dev).requires_grad_()
box = {}


def forward():
    h = lin(x)
    out = torch.zeros(2, 8, device=dev)
    out[:, 2:] = h[:, :6]          # a write into a view past its base's start
    box["out"] = out


if "same" in sys.argv[1:]:
    forward()
else:
    worker = threading.Thread(target=forward)
    worker.start()
    worker.join()
(box["out"] * torch.arange(16.).view(2, 8).to(dev)).sum().backward()
print("grad", [round(v, 3) for v in x.grad.sum(1).cpu().tolist()])
