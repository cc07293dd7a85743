"""Noise drawn from a CPU generator straight onto the device (KIND=gen_on_device), the MPS-safe way
(KIND=gen_then_move: diffusers' randn_tensor), and Adam(capturable=True) (KIND=capturable)."""
import os, torch
from torch import nn
BATCH_SIZE = 8
KIND = os.environ.get("KIND", "gen_on_device")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(16, 4); self.g = torch.Generator().manual_seed(3)
    def forward(self, x):
        if KIND == "gen_on_device":
            noise = torch.randn(x.shape, generator=self.g, device=x.device)
        elif KIND == "gen_then_move":
            noise = torch.randn(x.shape, generator=self.g).to(x.device)
        else:
            noise = torch.zeros_like(x)
        return self.l(x + 0.1 * noise)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)
def make_optimizer(params):
    return torch.optim.Adam(params, lr=1e-3, capturable=KIND == "capturable")
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
