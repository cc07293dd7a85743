"""A CUDA script: DataLoader(shuffle=True, generator=torch.Generator()) (CPU), a device generator seeding dropout masks
via bernoulli_, randperm(n, generator=g, device=dev), pickle of the device generator (KIND=base|pickle|subclass);
`dml` arg: realdml."""
import os, pickle, sys, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
KIND = os.environ.get("KIND", "base")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
ds = TensorDataset(torch.randn(32, 8), torch.randint(0, 3, (32,)))
dl = DataLoader(ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(2))
model = nn.Linear(8, 3).to(dev); opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator(device=dev).manual_seed(3)
if KIND == "pickle": g = pickle.loads(pickle.dumps(g))
if KIND == "subclass":
    class G(torch.Generator): pass
    g = G(device=dev); g.manual_seed(3); print("PROBE", type(g).__name__, flush=True)
for i, (x, y) in enumerate(dl):
    x, y = x.to(dev), y.to(dev)
    perm = torch.randperm(x.shape[0], generator=g, device=dev)
    mask = torch.empty_like(x).bernoulli_(0.8, generator=g) / 0.8
    loss = nn.functional.cross_entropy(model((x * mask)[perm]), y[perm]); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
