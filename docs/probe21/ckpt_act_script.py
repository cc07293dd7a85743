"""A CUDA script with activation checkpointing through dropout (HF gradient_checkpointing: non-reentrant,
KIND=nonreentrant; the older reentrant one, KIND=reentrant) and clip_grad_norm_; `dml` arg: realdml."""
import os, sys, torch
from torch import nn
from torch.utils.checkpoint import checkpoint
KIND = os.environ.get("KIND", "nonreentrant")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
block = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.2), nn.Linear(16, 8)).to(dev)
head = nn.Linear(8, 3).to(dev)
opt = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.1)
x, y = torch.randn(16, 8).to(dev), torch.randint(0, 3, (16,)).to(dev)
for i in range(3):
    h = checkpoint(block, x.requires_grad_(), use_reentrant=KIND == "reentrant")
    loss = nn.functional.cross_entropy(head(h), y); opt.zero_grad(); loss.backward()
    n = torch.nn.utils.clip_grad_norm_(block.parameters(), 1.0); opt.step()
    print(i, f"{loss.item():.6f}", f"{float(n):.5f}", flush=True)
