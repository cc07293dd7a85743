"""EMA / best-weights copies: copy.deepcopy of a module with buffers and of a state_dict (PyTorch's transfer-learning tutorial)."""
import copy, os, torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.c = nn.Conv2d(3, 4, 3); self.bn = nn.BatchNorm2d(4); self.h = nn.Linear(4, 2); self.best = None
    def forward(self, x):
        y = self.h(self.bn(self.c(x)).mean((2, 3)))
        what = os.environ.get("WHAT", "state_dict")
        if what == "state_dict":
            self.best = copy.deepcopy(self.state_dict())
        elif what == "module":
            self.best = copy.deepcopy(self.bn)
        elif what == "tensor":
            self.best = copy.deepcopy(y.detach())
        print("copied", what, flush=True)
        return y
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randn(n, 3, 8, 8), torch.randint(0, 2, (n,))
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
