"""A CUDA script resuming from its own checkpoint of device tensors: torch.save(state) then
torch.load(path, map_location=dev, weights_only=WO) (WO=1: the safe loading torch recommends; 0; unset: torch's
default). `dml` arg: realdml."""
import os, sys, tempfile, torch
from torch import nn
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
WO = os.environ.get("WO"); OPT = os.environ.get("OPT", "1") == "1"  # OPT=0: the model alone (no CPU step tensors)
torch.manual_seed(0)
model = nn.Linear(8, 3).to(dev); opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x, y = torch.randn(16, 8).to(dev), torch.randint(0, 3, (16,)).to(dev)
p = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
for i in range(3):
    loss = nn.functional.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict() if OPT else None, "step": i}, p)
    kw = {} if WO is None else {"weights_only": WO == "1"}
    ck = torch.load(p, map_location=dev, **kw)
    model.load_state_dict(ck["model"]); OPT and opt.load_state_dict(ck["opt"])
    print(i, f"{loss.item():.6f}", ck["model"]["weight"].device, flush=True)
