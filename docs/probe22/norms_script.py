"""A CUDA script training a small conv net with another normalization layer (KIND=...): gn (GroupNorm), lazybn
(LazyBatchNorm2d), bn_cl (BatchNorm2d, model and input channels_last), syncbn_eval (SyncBatchNorm, a BatchNorm model
converted, then trained one process and evaluated), frozen (torchvision FrozenBatchNorm2d), bn_amp (BatchNorm2d,
momentum 0.3, eval after each step). Prints each loss and the statistics' sums. `dml` arg: realdml."""
import os, sys, torch
from torch import nn
KIND = os.environ.get("KIND", "gn")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
if KIND == "gn": norm = nn.GroupNorm(2, 4)
elif KIND == "lazybn": norm = nn.LazyBatchNorm2d()
elif KIND == "frozen":
    from torchvision.ops.misc import FrozenBatchNorm2d
    norm = FrozenBatchNorm2d(4); norm.running_mean.fill_(0.5); norm.running_var.fill_(2.0)
else: norm = nn.BatchNorm2d(4, momentum=0.3)
model = nn.Sequential(nn.Conv2d(3, 4, 3), norm, nn.ReLU(), nn.Flatten(), nn.LazyLinear(3))
if KIND == "syncbn_eval": model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
model(torch.randn(2, 3, 6, 6))  # materialize lazy layers on the CPU, as scripts do before moving
model = model.to(dev)
x = torch.randn(4, 3, 6, 6); y = torch.randint(0, 3, (4,))
if KIND == "bn_cl": model = model.to(memory_format=torch.channels_last); x = x.to(memory_format=torch.channels_last)
x, y = x.to(dev), y.to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for i in range(3):
    model.train(KIND != "syncbn_eval" or i < 2)
    loss = nn.functional.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
n = model[1]
stats = [round(t.sum().item(), 5) for t in (getattr(n, "running_mean", None), getattr(n, "running_var", None)) if t is not None]
nbt = getattr(n, "num_batches_tracked", None)
model.eval()
with torch.no_grad(): out = model(x)
print("PROBE", KIND, type(n).__name__, "stats", stats, "nbt", None if nbt is None else int(nbt), "eval", round(out.sum().item(), 5), flush=True)
