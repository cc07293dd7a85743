"""Re-probe 16: `scan --target dml --confirm` calls dropout's backward "contradicted ... wrong" (exit 5).

    . ~/.cache/realdml/env.sh
    <torch 2.4.1 python> -m dmlprof scan docs/probe16/confirm_dropout_false_contradiction.py --target dml --confirm

Expected: every signature confirmed (exit 0). On real torch-directml, aten::native_dropout returns a float32
mask, so a real step's native_dropout_backward gets (float32, float32) and its result is right (float32, the
CPU's values): run this file plainly under realdml (`python docs/probe16/confirm_dropout_false_contradiction.py`)
to see it. The prediction records the CPU's bool mask, and the replay of native_dropout_backward(bool, float32)
on real DirectML returns a bool tensor: "contradicted: aten::native_dropout_backward: predicted device, real
device, wrong: output: dtype bool on the device, float32 on the CPU", exit 5, on any model with nn.Dropout.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 8


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 24), nn.ReLU(), nn.Dropout(0.2), nn.Linear(24, 3))


def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 16, generator=g), torch.randint(0, 3, (batch_size,), generator=g)


def loss_fn(out, target):
    return F.cross_entropy(out, target)


def make_optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


if __name__ == "__main__":
    import torch_directml   # real torch-directml (realdml): what a real step does
    dev = torch_directml.device()
    x = torch.randn(8, 24, device=dev, requires_grad=True)
    out, mask = torch.ops.aten.native_dropout(x.detach(), 0.2, True)
    grad = torch.autograd.grad(F.dropout(x, 0.2, True).sum(), x)[0]
    print("real DirectML: native_dropout's mask", mask.dtype, "; dropout's gradient", grad.dtype,
          sorted(set(grad.cpu().flatten().tolist())))
