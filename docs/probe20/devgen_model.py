"""Device objects and generators in a model's forward, one idiom per KIND, under --target mps/xpu/dml."""
import os, sys, numpy as np, torch
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "with_ctx")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(8, 8); self.head = nn.Linear(8, 3); self.g = torch.Generator().manual_seed(0); self.lazy = None
    def forward(self, x):
        h = torch.relu(self.lin(x)); t = x.device.type; extra = None
        if KIND == "with_ctx":
            with torch.device(t): extra = torch.ones(8)
        elif KIND == "set_default":
            torch.set_default_device(torch.device(t, 0)); extra = torch.ones(8); torch.set_default_device(None)
        elif KIND == "set_default_xdev":
            torch.set_default_device(x.device); extra = torch.ones(8); torch.set_default_device(None)
        elif KIND == "set_default_str":
            torch.set_default_device(t); extra = torch.ones(8); torch.set_default_device(None)
        elif KIND == "lazy_linear":  # a lazily made layer on the input's device (LazyLinear-style)
            if self.lazy is None: self.lazy = nn.Linear(8, 8, device=torch.device(t, 0))
            extra = self.lazy.weight.sum(0).detach()
        elif KIND == "numpy_to": extra = torch.from_numpy(np.ones(8, dtype=np.float32)).to(torch.device(t), non_blocking=True)
        elif KIND == "dict_key": extra = torch.ones(8, device=x.device) * {torch.device(t, 0): 3.0}.get(x.device, -1.0)
        elif KIND == "new_tensor": extra = h.new_tensor([1.0] * 8, device=torch.device(t))
        elif KIND == "gen_cpu_move": extra = torch.randperm(8, generator=self.g).float().to(x.device)
        elif KIND == "gen_randint": extra = torch.randint(0, 10, (8,), generator=self.g, device=x.device).float()
        elif KIND == "gen_none": extra = torch.randn(8, generator=None, device=x.device) * 0
        elif KIND == "gen_bernoulli": extra = torch.bernoulli(torch.full_like(h[0], 0.5), generator=self.g)
        elif KIND == "gen_cpu_normal": extra = torch.normal(0.0, 1.0, (8,), generator=self.g).to(x.device)
        elif KIND == "gen_uniform_": extra = torch.empty(8, device=x.device).uniform_(generator=self.g)
        print("PROBE", KIND, extra.device if extra is not None else None, file=sys.stderr)
        return self.head(h + (extra if extra is not None else 0))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
