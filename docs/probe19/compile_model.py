"""torch.compile'd block inside the model (backend from COMPILE_BACKEND), with a device-type branch inside."""
import os, torch
from torch import nn
BATCH_SIZE = 8
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(16, 32); self.b = nn.Linear(32, 4)
        self.body = torch.compile(self._body, backend=os.environ.get("COMPILE_BACKEND", "aot_eager"))
    def _body(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        if h.device.type == "mps":
            h = h * 1.0
        return self.b(h)
    def forward(self, x): return self.body(x)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
