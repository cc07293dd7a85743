"""A CUDA training script with timm's ModelEmaV2 pattern (deepcopy of the model, EMA by lerp_ in no_grad) and a
checkpoint of model + EMA + optimizer saved and reloaded each epoch (map_location=the device)."""
import copy, io, os, sys, torch
CKPT = os.environ.get("CKPT", "1") == "1"
from torch import nn
dev = "cuda" if torch.cuda.is_available() else "cpu"
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1)).to(dev)
ema = copy.deepcopy(m).eval(); [p.requires_grad_(False) for p in ema.parameters()]
opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(32, 8, device=dev); y = torch.randn(32, 1, device=dev)
for i in range(6):
    loss = nn.functional.mse_loss(m(x), y); opt.zero_grad(); loss.backward(); opt.step()
    with torch.no_grad():
        for e, p in zip(ema.state_dict().values(), m.state_dict().values()):
            e.copy_(p) if not e.dtype.is_floating_point else e.mul_(0.9).add_(p, alpha=0.1)
    if CKPT: buf = io.BytesIO(); torch.save({"m": m.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict()}, buf); buf.seek(0)
    if CKPT: ck = torch.load(buf, map_location=dev); ema.load_state_dict(ck["ema"]); opt.load_state_dict(ck["opt"])
    print(i, f"{loss.item():.6f}", f"ema {sum(float(v.float().sum()) for v in ema.state_dict().values()):.5f}", flush=True)
