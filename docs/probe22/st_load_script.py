"""A CUDA script loading safetensors weights straight onto its device (`load_file(p, device=...)`, `safe_open(...,
device=...)`, as HF and diffusers loaders do) and training a step. `dml` arg: realdml (device str(torch_directml.device()))."""
import os, sys, tempfile, torch
from torch import nn
from safetensors.torch import save_file, load_file, safe_open
dev = "cuda" if torch.cuda.is_available() else "cpu"
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = str(torch_directml.device())
torch.manual_seed(0)
p = os.path.join(tempfile.mkdtemp(), "m.safetensors"); save_file(nn.Linear(8, 3).state_dict(), p)
sd = load_file(p, device=dev)
print("PROBE load_file", {k: str(v.device) for k, v in sd.items()}, flush=True)
with safe_open(p, framework="pt", device=dev) as f: w = f.get_tensor("weight")
print("PROBE safe_open", w.device, round(w.sum().item(), 5), flush=True)
model = nn.Linear(8, 3).to(dev); model.load_state_dict(sd); opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8).to(dev); y = torch.randint(0, 3, (4,)).to(dev)
for i in range(3):
    loss = nn.functional.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
