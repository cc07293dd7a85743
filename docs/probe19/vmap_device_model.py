"""Per-sample gradients (torch.func) whose loss builds a mask from x.device inside vmap, with an MPS branch."""
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
BATCH_SIZE = 8
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(16, 4); self.aux = nn.Linear(16, 4)
    def forward(self, x):
        params = {k: v.detach() for k, v in self.aux.named_parameters()}
        def loss1(p, xi):
            w = torch.ones(4, device=xi.device) if xi.device.type == "mps" else torch.full((4,), 2.0, device=xi.device)
            return (functional_call(self.aux, p, (xi,)) * w).pow(2).sum()
        g = vmap(grad(loss1), in_dims=(None, 0))(params, x)
        return self.l(x) + g["weight"].norm(dim=(1, 2)).unsqueeze(1) * 0.0
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
