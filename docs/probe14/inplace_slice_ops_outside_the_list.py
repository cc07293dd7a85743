"""Re-probe 14, case 20: in-place ops outside the written-view class's 32 write an offset slice under autograd.

On real torch-directml (torch 2.4.1 + torch-directml 0.2.5, realdml) every view reports storage_offset() 0, so
autograd's CopySlices misplaces the written slice's gradient whatever the in-place op is. Measured there
(x = arange(1., 9.) requires grad; z = (x * 1).view(2, 4); OP(z[:, 2:]); (z * arange(8).view(2, 4)).sum().backward()):
    hardtanh_ (nn.ReLU6(inplace=True))  CPU [0, 1, 2, 3, 4, 5, 0, 0]           DML [0, 1, 2, 3, 0, 0, 6, 7]
    silu_ (nn.SiLU(inplace=True))       CPU [0, 1, 2.176, 3.158, 4, 5, ...]    DML [0, 1.053, 2, 3, 4.022, ...]
    sqrt_                               CPU [0, 1, 0.577, 0.75, ...]           DML [0, 0.25, 2, 3, ...]
    masked_scatter_, index_copy_, threshold_ (nn.Threshold(inplace=True)), square_: all differ from the CPU.
dmlprof/tables/wrong_classes.py IN_PLACE_WRITES lists 32 ops (copy_, fill_, mul_, relu_, sigmoid_, ...); these are
not among them, so

    PYTHONPATH=. python -m dmlprof check docs/probe14/inplace_slice_ops_outside_the_list.py --target dml --from cuda -- relu6

passes (exit 0, "passed", no known-wrong call) for relu6, silu, sqrt, masked_scatter, threshold (index_copy fails
the check only for its CPU fallback), while the same script on real DirectML trains on misplaced gradients. The
control `-- mul` (mul_, listed) is flagged (exit 6).
"""
import sys

import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
which = sys.argv[1] if len(sys.argv) > 1 else "relu6"
torch.manual_seed(0)
lin = nn.Linear(8, 8).to(dev)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
ops = {
    "relu6": lambda h: nn.ReLU6(inplace=True)(h[:, 4:]),
    "silu": lambda h: nn.SiLU(inplace=True)(h[:, 4:]),
    "sqrt": lambda h: h[:, 4:].sqrt_(),
    "masked_scatter": lambda h: h[:, 4:].masked_scatter_(h[:, 4:] > 0.5, torch.zeros(4 * h.shape[0], device=h.device)),
    "index_copy": lambda h: h[1:].index_copy_(1, torch.tensor([0], device=h.device),
                                              torch.zeros(h.shape[0] - 1, 1, device=h.device)),
    "threshold": lambda h: nn.Threshold(0.1, 0.0, inplace=True)(h[:, 4:]),
    "mul": lambda h: h[:, 4:].mul_(3),  # control: in the class
}
for step in range(4):
    x = torch.rand(6, 8, device=dev)
    h = lin(x).abs() + 0.1
    ops[which](h)
    loss = h.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, round(loss.item(), 5))
