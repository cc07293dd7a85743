"""A CUDA training script compiling its model (KIND=own: a class of its own; seq: nn.Sequential; fn: a @torch.compile
loss helper; guard: `if dev.type == "cuda": model = torch.compile(model)`); `python compile_script.py dml` on realdml."""
import os, sys, torch
from torch import nn
import torch.nn.functional as F
KIND = os.environ.get("KIND", "own")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
class Net(nn.Module):
    def __init__(self): super().__init__(); self.a = nn.Linear(8, 16); self.b = nn.Linear(16, 3)
    def forward(self, x): return self.b(F.relu(self.a(x)))
@torch.compile
def loss_fn(out, y): return F.cross_entropy(out, y) + 0.01 * out.pow(2).mean()
torch.manual_seed(0)
model = (nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)) if KIND == "seq" else Net()).to(dev)
if KIND in ("own", "seq"): model = torch.compile(model)
if KIND == "guard" and dev.type == "cuda": model = torch.compile(model, mode="reduce-overhead")
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
g = torch.Generator().manual_seed(1)
x, y = torch.randn(16, 8, generator=g).to(dev), torch.randint(0, 3, (16,), generator=g).to(dev)
for i in range(4):
    out = model(x)
    loss = loss_fn(out, y) if KIND == "fn" else F.cross_entropy(out, y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
