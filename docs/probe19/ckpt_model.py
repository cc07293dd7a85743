"""Activation checkpointing (HF gradient_checkpointing style) through dropout."""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
BATCH_SIZE = 8
class Block(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(32, 32); self.d = nn.Dropout(0.1)
    def forward(self, x): return x + self.d(torch.relu(self.l(x)))
class Net(nn.Module):
    def __init__(self, reentrant):
        super().__init__(); self.blocks = nn.ModuleList(Block() for _ in range(3)); self.head = nn.Linear(32, 4); self.r = reentrant
    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=self.r)
        return self.head(x)
import os
def build_model():
    torch.manual_seed(0); return Net(os.environ.get("REENTRANT") == "1")
def make_batch(n):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 32, generator=g, requires_grad=True), torch.randint(0, 4, (n,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
