"""A CUDA training script that keeps its best weights (tutorial style) and saves a checkpoint each epoch."""
import copy, os, tempfile, torch
from torch import nn
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 16, device=device); y = torch.randint(0, 4, (64,), device=device)
best, best_loss = None, 1e9
ckdir = tempfile.mkdtemp()
for epoch in range(4):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if loss.item() < best_loss:
        best_loss = loss.item()
        if os.environ.get("DEEPCOPY", "1") == "1":
            best = copy.deepcopy(model.state_dict())
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, os.path.join(ckdir, "ck.pt"))
    print(epoch, f"{loss.item():.6f}", flush=True)
print("saved", os.path.getsize(os.path.join(ckdir, "ck.pt")) > 0)
