"""Re-probe 12: a DirectML script saves its model's state_dict (tensors on the device) with torch.save.
Real torch-directml 0.2.5 (plainly, and under `dmlprof scan --device dml` on realdml): torch.save writes w.pt
(1,352 bytes, complete); the torch.load(weights_only=True) after it raises UnpicklingError (torch-directml's own).
`dmlprof scan this.py --device emulated-dml --run-to-end` (torch 2.13 and 2.4.1), and `--target dml` (a script runs
on the emulated device): exit 3 at the torch.save line, "Attempted to set the storage of a tensor on device "cpu"
to a storage on different device "privateuseone:0"" (aten::set_.source_Storage), and w.pt is left truncated:
a later plain `torch.load("w.pt")` says "PytorchStreamReader failed locating file data/0 ... checkpoint file is
corrupted". The same through `--from cuda` for a CUDA script's checkpoint (a resume script then fails plainly)."""
import torch, torch.nn as nn, io
import torch_directml
dev = torch_directml.device()
m = nn.Linear(4, 2).to(dev); opt = torch.optim.SGD(m.parameters(), 0.1)
for step in range(3):
    loss = m(torch.randn(3, 4).to(dev)).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
torch.save(m.state_dict(), "w.pt")
print("loaded", torch.load("w.pt", weights_only=True, map_location="cpu")["weight"].shape)
