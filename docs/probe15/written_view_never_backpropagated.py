"""Re-probe 15: the written-view class fails `check` (exit 6, "known wrong results ... the model trains on them") on
writes whose gradient is never computed.

Case "eval" (default): a YOLO-style detection head decodes boxes in place into slices of its output
(`y[..., 2:4] = ...`), run in `eval()` for inference without `torch.no_grad()` (very common: grad mode is on by
default). No backward ever runs. Case "history": a training loop keeps each step's loss in a preallocated tensor
(`losses[i] = loss`, not detached); nothing backpropagates through `losses`.

    PYTHONPATH=. python -m dmlprof check docs/probe15/written_view_never_backpropagated.py --target dml --from cuda
    PYTHONPATH=. python -m dmlprof check docs/probe15/written_view_never_backpropagated.py --target dml --from cuda \
        -- history

both: "FAIL calls with known wrong results ... wrong on DirectML: aten::copy_ ...: the gradients flowing back through
the written tensor are wrong: the model trains on them", exit 6. Real torch-directml (realdml, torch 2.4.1) prints the
CPU's numbers ("sum 447.168" for eval): the forward values are right and no gradient of the write is ever taken, so
the program is right on DirectML. The class is judged when autograd records the write (grad mode on, something
requiring grad), not when a backward runs through the CopySlices node it leaves.
"""
import sys

import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)


class Detect(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 3 * 7, 1)

    def forward(self, x):
        y = self.conv(x).view(x.shape[0], 3, 7, 4, 4).permute(0, 1, 3, 4, 2).sigmoid()
        y[..., 0:2] = y[..., 0:2] * 2.0 - 0.5
        y[..., 2:4] = (y[..., 2:4] * 2) ** 2
        return y.reshape(x.shape[0], -1, 7)


if sys.argv[1:] == ["history"]:
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    losses = torch.zeros(5, device=dev)
    for i in range(5):
        x, y = torch.randn(4, 8, device=dev), torch.randn(4, 1, device=dev)
        loss = (m(x) - y).pow(2).mean()
        losses[i] = loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("losses", [round(v, 4) for v in losses.tolist()])
else:
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), Detect()).to(dev).eval()
    out = m(torch.randn(2, 3, 4, 4, device=dev))
    print("sum", round(out.sum().item(), 4), "boxes", tuple(out.shape))
