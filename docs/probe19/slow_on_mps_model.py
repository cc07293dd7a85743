"""A model whose MPS branch waits 120 s (a stand-in for a long step): the user stops dmlprof with Ctrl-C/SIGTERM."""
import time, torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(8, 4)
    def forward(self, x):
        if x.device.type == "mps":
            time.sleep(120)
        return self.l(x)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randn(n, 8), torch.randint(0, 4, (n,))
