"""Re-probe 15: an autograd.Function that writes its input in place (`ctx.mark_dirty`, as InPlaceABN and
memory-saving activation layers do), applied to a slice past its base's start: wrong gradients on DirectML, check
passes.

    PYTHONPATH=. python -m dmlprof check docs/probe15/mark_dirty_function_on_offset_slice.py --target dml --from cuda

"check ... passed", exit 0. Plainly (CPU) "grad [0, 1, 6, 9, 4, 5, 18, 21]"; on real torch-directml (realdml,
torch 2.4.1: `source ~/.cache/realdml/env.sh`, the script with `dev = torch_directml.device()`) "grad [0, 3, 2, 3, 12,
15, 6, 7]": the slice's gradient lands at the base's start, as for any in-place write autograd rebuilds with
CopySlices. With `-- prefix` (the slice at offset 0) both give the CPU's. The written-view class is judged inside the
call, where a Function's forward runs with grad mode off, so `mul_` there is "not recorded by autograd"; autograd
rebases the view's history (CopySlices) when the Function returns the dirty tensor.
"""
import sys

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"


class InplaceScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(3)

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


x = torch.arange(1., 9., device=dev).requires_grad_()
z = (x * 1).view(2, 4)
InplaceScale.apply(z[:, :2] if sys.argv[1:] == ["prefix"] else z[:, 2:])
(z * torch.arange(8., device=dev).view(2, 4)).sum().backward()
print("grad", [round(v) for v in x.grad.cpu().tolist()])
