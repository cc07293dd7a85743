"""A CUDA script naming its device by strings with and without an index (KIND=strmix: device="cuda" factory added to
a "cuda:0" model's output; scaler: torch.amp.GradScaler("cuda") + autocast("cuda"); typestr: a factory on
x.device.type; devctx: `with torch.device("cuda"):` model built there). `python devmix_script.py` runs on the CPU."""
import os, sys, torch
from torch import nn
KIND = os.environ.get("KIND", "strmix")
cuda = torch.cuda.is_available()
dev0 = "cuda:0" if cuda else "cpu"; devs = "cuda" if cuda else "cpu"
torch.manual_seed(0)
if KIND == "devctx":
    with torch.device(devs): model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
else:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev0)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler(devs, enabled=cuda) if KIND == "scaler" else None
g = torch.Generator().manual_seed(1)
x = torch.randn(16, 8, generator=g).to(dev0); y = torch.randint(0, 3, (16,), generator=g).to(devs)
for i in range(3):
    if KIND == "scaler":
        with torch.autocast(devs, enabled=cuda):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
    else:
        out = model(x)
        if KIND == "strmix": out = out + torch.zeros(3, device=devs)
        if KIND == "typestr": out = out + torch.zeros(3, device=x.device.type)
        loss = nn.functional.cross_entropy(out, y); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", x.device, flush=True)
