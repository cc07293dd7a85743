"""An Apple-Silicon training script (KIND=...): base (mps chosen by torch.backends.mps.is_available(), torch.mps
seeding, synchronize, empty_cache, current_allocated_memory), gen (dropout mask from torch.Generator(device="mps"), a bool mask), genf (the mask as float),
amp (torch.autocast("mps", dtype=float16)). `dml` arg: realdml (the same calls' DirectML spelling is not made)."""
import os, sys, torch
from torch import nn
KIND = os.environ.get("KIND", "base")
on_dml = len(sys.argv) > 1 and sys.argv[1] == "dml"
if on_dml:
    import torch_directml; dev = torch_directml.device()
else:
    dev = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
torch.manual_seed(0)
if dev.type == "mps": torch.mps.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(4, 8).to(dev); y = torch.randint(0, 3, (4,)).to(dev)
g = torch.Generator(device=dev).manual_seed(1) if KIND.startswith("gen") else None
for i in range(3):
    with torch.autocast(dev.type, dtype=torch.float16, enabled=KIND == "amp"):
        h = model(x)
        if g is not None:
            keep = torch.rand(h.shape, device=dev, generator=g) > 0.2
            h = h * (keep.float() if KIND == "genf" else keep)
        loss = nn.functional.cross_entropy(h.float(), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if dev.type == "mps":
        torch.mps.synchronize(); torch.mps.empty_cache()
        mem = torch.mps.current_allocated_memory()
    print(i, f"{loss.item():.6f}", flush=True)
