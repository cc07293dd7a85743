"""AdamW with fused=True (or foreach per OPT env), grad clipping with foreach, as recipes pick by device."""
import os, torch
from torch import nn
BATCH_SIZE = 8
def build_model(): torch.manual_seed(0); return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)
def make_optimizer(params):
    kind = os.environ.get("OPT", "fused")
    if kind == "fused": return torch.optim.AdamW(params, lr=1e-3, fused=True)
    if kind == "foreach": return torch.optim.AdamW(params, lr=1e-3, foreach=True)
    if kind == "auto":
        params = list(params)
        return torch.optim.AdamW(params, lr=1e-3, fused=params[0].device.type in ("cuda", "mps", "xpu"))
    if kind == "adagrad_fused": return torch.optim.Adagrad(params, lr=1e-2, fused=True)
    return torch.optim.SGD(params, lr=0.01, fused=True)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
