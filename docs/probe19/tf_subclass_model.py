"""A __torch_function__ tensor subclass (a tagged activation whose F.layer_norm / F.gelu calls are counted) and the
user's own TorchFunctionMode counting F.linear calls: what torch.overrides reports must not change under dmlprof."""
import sys, torch
from torch import nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
BATCH_SIZE = 8
COUNTS = {"subclass": 0, "mode_linear": 0}
class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (F.layer_norm, F.gelu): COUNTS["subclass"] += 1
        return super().__torch_function__(func, types, args, kwargs or {})
class CountLinear(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.linear: COUNTS["mode_linear"] += 1
        return func(*args, **(kwargs or {}))
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(16, 16); self.n = nn.LayerNorm(16); self.h = nn.Linear(16, 4)
        self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    def forward(self, x):
        with CountLinear():
            h = self.a(x).as_subclass(Tagged)
            h = F.gelu(self.n(h))
            with torch.no_grad():
                e = self.enc(h.as_subclass(torch.Tensor).unsqueeze(1)).squeeze(1)
            out = self.h(h.as_subclass(torch.Tensor) + e)
        print("COUNTS", COUNTS, file=sys.stderr); COUNTS.update(subclass=0, mode_linear=0)
        return out
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
