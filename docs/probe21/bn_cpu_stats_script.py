"""A CUDA script's own BatchNorm keeping its statistics as plain attributes (not buffers: Module.to leaves them on
the CPU) and handing them to F.batch_norm with device input; `dml` arg: realdml. KIND=train (training=True) or eval."""
import os, sys, torch
from torch import nn
KIND = os.environ.get("KIND", "train")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
class MyBN(nn.Module):
    def __init__(self, c):
        super().__init__(); self.weight = nn.Parameter(torch.ones(c)); self.bias = nn.Parameter(torch.zeros(c))
        self.running_mean = torch.zeros(c); self.running_var = torch.ones(c)  # not register_buffer: stays on the CPU
    def forward(self, x):
        return nn.functional.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                        training=KIND == "train", momentum=0.1)
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(4, 6), MyBN(6)).to(dev)
x = torch.randn(16, 4).to(dev)
for i in range(2):
    out = m(x); print(i, "rm", f"{float(m[1].running_mean.sum()):.5f}", m[1].running_mean.device, f"{float(out.sum()):.5f}", flush=True)
