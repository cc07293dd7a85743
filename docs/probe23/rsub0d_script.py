"""`torch.tensor(1.0) - x` (0-d CPU tensor minus a device tensor), forward only; `dml` arg: realdml."""
import sys, torch
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
x = torch.tensor([1.0, 2.0, 5.0]).to(dev)
print("t0d-x", (torch.tensor(1.0) - x).cpu().tolist())
print("1-x", (1 - x).cpu().tolist())
print("t0d/x", (torch.tensor(1.0) / x).cpu().tolist())
print("t0d.sub(x)", torch.tensor(1.0).sub(x).cpu().tolist())
print("rsub(x,t0d)", torch.rsub(x, torch.tensor(1.0)).cpu().tolist())
print("t0d_dev-x", (torch.tensor(1.0).to(dev) - x).cpu().tolist())
print("t0d**x", (torch.tensor(2.0) ** x).cpu().tolist())
print("t0d>x", (torch.tensor(2.0) > x).cpu().tolist())
