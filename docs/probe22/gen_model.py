"""A forward drawing noise from a generator made on the input's device (`torch.Generator(device=x.device)`, as
seeded augmentation and diffusers' `randn_tensor` do for CUDA). `python gen_model.py dml` trains on realdml."""
import sys, torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 3)
    def forward(self, x):
        g = torch.Generator(device=x.device).manual_seed(1)
        return self.lin(x + 0.1 * torch.randn(x.shape, device=x.device, generator=g))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
