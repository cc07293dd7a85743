"""Model code rebuilding a device from its parts (accelerate/lightning style: torch.device(type, index))."""
import torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(8, 4)
    def forward(self, x):
        dev = torch.device(x.device.type, x.device.index or 0)
        pos = torch.arange(x.shape[1], device=dev, dtype=x.dtype)
        return self.l(x + pos)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randn(n, 8), torch.randint(0, 4, (n,))
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
