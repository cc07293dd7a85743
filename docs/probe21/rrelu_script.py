"""A CUDA script training through nn.RReLU (random slopes in training): the input's gradient must equal the slope
the forward applied (out / x where x < 0); `dml` arg: realdml."""
import sys, torch
from torch import nn
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
x = (-torch.rand(64) - 0.5).to(dev).requires_grad_()
act = nn.RReLU(0.1, 0.3).train()
for i in range(2):
    out = act(x); out.sum().backward()
    slope = (out / x).detach()
    print(i, "max |grad - slope|", f"{float((x.grad - slope).abs().max()):.5f}", "grad sum", f"{float(x.grad.sum()):.4f}", flush=True)
    x.grad = None
