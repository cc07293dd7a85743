"""torch.compile of a block inside the model: KIND=takes (only takes device tensors), makes (makes one inside)."""
import os, sys, torch
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "takes")
def block_takes(h): return torch.nn.functional.gelu(h) * 2 + 1
def block_makes(h): return h + torch.ones(h.shape[-1], device=h.device)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(8, 8); self.head = nn.Linear(8, 3)
        self.block = torch.compile(block_takes if KIND == "takes" else block_makes, backend="aot_eager")
    def forward(self, x): return self.head(self.block(self.lin(x)))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
