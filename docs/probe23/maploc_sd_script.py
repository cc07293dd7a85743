"""A CUDA script resuming: model.load_state_dict(torch.load(path, map_location=device)) -- the common idiom.
`dml` arg: realdml."""
import io, sys, torch
from torch import nn
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
b = io.BytesIO(); torch.save(nn.Linear(8, 3).state_dict(), b); b.seek(0)
model = nn.Linear(8, 3).to(dev)
model.load_state_dict(torch.load(b, map_location=dev))
x = torch.randn(4, 8).to(dev)
print("PROBE", f"{model(x).sum().item():.6f}", flush=True)
