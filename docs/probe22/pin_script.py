"""A CUDA training script's input pipeline: DataLoader(pin_memory=True, num_workers=W) over CPU data, batches moved
with non_blocking=True; a storage-offset read of a view (as_strided by storage_offset()). `dml` arg: realdml."""
import os, sys, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
ds = TensorDataset(torch.randn(16, 8), torch.randint(0, 3, (16,)))
dl = DataLoader(ds, batch_size=4, shuffle=False, pin_memory=True, num_workers=int(os.environ.get("W", "0")))
model = nn.Linear(8, 3).to(dev); opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (xb, yb) in enumerate(dl):
    xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
    loss = nn.functional.cross_entropy(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
w = model.weight.detach(); row = w[1:]
print("PROBE as_strided_by_offset", round(torch.as_strided(row, row.shape, row.stride(), row.storage_offset()).sum().item(), 5),
      "from_base", round(torch.as_strided(w, row.shape, row.stride(), row.storage_offset()).sum().item(), 5),
      "row", round(row.sum().item(), 5), "offset", row.storage_offset())
