"""CUDA-style input pipeline: DataLoader(pin_memory=True, num_workers=WORKERS) (its pin-memory thread), batches moved
with non_blocking=True, an offset-slice write of each batch into a preallocated device buffer."""
import os, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
ds = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
dl = DataLoader(ds, batch_size=32, shuffle=True, pin_memory=True, num_workers=int(os.environ.get("WORKERS", "0")),
                generator=torch.Generator().manual_seed(5))
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
buf = torch.zeros(40, 16, device=dev)
for epoch in range(2):
    for i, (x, y) in enumerate(dl):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        buf[8:].copy_(x)
        loss = nn.functional.cross_entropy(model(buf[8:]), y)
        opt.zero_grad(); loss.backward(); opt.step()
    print(epoch, f"{loss.item():.6f}", flush=True)
