"""BatchNorm's running statistics after one training forward (a CUDA script's device; `dml` on realdml)."""
import sys, torch
from torch import nn
dev = "cuda" if torch.cuda.is_available() else "cpu"
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
bn = nn.BatchNorm1d(4).to(dev); x = (torch.randn(32, 4) * 3 + 1).to(dev)
for i in range(3):
    bn(x)
    print(i, "running_mean", f"{float(bn.running_mean.sum()):.5f}", "running_var", f"{float(bn.running_var.sum()):.5f}", "nbt", int(bn.num_batches_tracked), flush=True)
