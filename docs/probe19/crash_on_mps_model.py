"""A model whose MPS branch calls native code that crashes (a custom Metal-extension stand-in: ctypes segfault)."""
import ctypes, torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(8, 4)
    def forward(self, x):
        if x.device.type == "mps":
            ctypes.string_at(0)          # the extension's crash
        return self.l(x)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randn(n, 8), torch.randint(0, 4, (n,))
