"""A CUDA script loading a CPU checkpoint onto its device: torch.load(buf, map_location=dev) (KIND=device), "cuda:0"
string (str) -- with --from cuda these become torch-directml's device. `dml` arg: realdml."""
import io, os, sys, torch
KIND = os.environ.get("KIND", "device")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
b = io.BytesIO(); torch.save({"b": torch.ones(3)}, b); b.seek(0)
t = torch.load(b, map_location=dev if KIND == "device" else str(dev))["b"]
print("PROBE", t.device, (t + torch.ones(3, device=dev)).sum().item(), flush=True)
