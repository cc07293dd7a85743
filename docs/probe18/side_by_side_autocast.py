"""timm-style: the body under torch.autocast(device_type=x.device.type, dtype=torch.float16)."""
import torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(16, 32); self.b = nn.Linear(32, 3)
    def forward(self, x):
        with torch.autocast(device_type=x.device.type, dtype=torch.float16):
            h = self.b(torch.relu(self.a(x)))
        return h.float()
def build_model():
    torch.manual_seed(0); return Net()
def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 16, generator=g), torch.randint(0, 3, (batch_size,), generator=g)
