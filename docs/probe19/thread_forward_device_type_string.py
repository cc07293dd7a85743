"""A forward that runs its two branches in a thread pool (a hand-rolled model-parallel block) and builds a position
table from x.device in the worker."""
import torch
from concurrent.futures import ThreadPoolExecutor
from torch import nn
BATCH_SIZE = 8
POOL = ThreadPoolExecutor(2)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(16, 16); self.b = nn.Linear(16, 16); self.h = nn.Linear(16, 4)
    def branch(self, lin, x):
        pos = torch.arange(16, device=x.device.type).float() / 16     # "mps" on the device
        if x.device.type == "mps":
            pos = pos.to(torch.float32)
        return torch.relu(lin(x) + pos)
    def forward(self, x):
        import os
        if os.environ.get("NOTHREAD"):
            return self.h(self.branch(self.a, x) + self.branch(self.b, x))
        fa = POOL.submit(self.branch, self.a, x); fb = POOL.submit(self.branch, self.b, x)
        return self.h(fa.result() + fb.result())
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
