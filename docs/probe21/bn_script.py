"""Running statistics in a CUDA script (KIND=...); `python bn_script.py dml` on realdml. Prints the stats' sums and
an evaluation's output sum after 3 training forwards."""
import os, sys, copy, torch
from torch import nn
KIND = os.environ.get("KIND", "momentum_none")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
def stats(m):
    rm = sum(float(b.sum()) for n, b in m.named_buffers() if n.endswith("running_mean"))
    rv = sum(float(b.sum()) for n, b in m.named_buffers() if n.endswith("running_var"))
    return f"rm {rm:.5f} rv {rv:.5f}"
if KIND == "momentum_none": m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6, momentum=None))
elif KIND == "instnorm": m = nn.Sequential(nn.Conv1d(3, 4, 3), nn.InstanceNorm1d(4, track_running_stats=True, affine=True))
elif KIND == "syncbn": m = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
elif KIND == "bn3d_half": m = nn.Sequential(nn.Conv3d(2, 3, 1), nn.BatchNorm3d(3))
elif KIND == "functional": m = nn.Linear(4, 6)
elif KIND == "swa_update_bn": m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
m = m.to(dev)
shape = {"instnorm": (5, 3, 9), "syncbn": (4, 3, 6, 6), "bn3d_half": (4, 2, 3, 3, 3)}.get(KIND, (16, 4))
g = torch.Generator().manual_seed(1)
xs = [(torch.randn(*shape, generator=g) * 3 + 1).to(dev) for _ in range(3)]
rm = torch.zeros(6, device=dev); rv = torch.ones(6, device=dev)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
if KIND == "swa_update_bn":
    swa = torch.optim.swa_utils.AveragedModel(m)
    for i, x in enumerate(xs):
        loss = m(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step(); swa.update_parameters(m)
    loader = [x for x in xs]
    torch.optim.swa_utils.update_bn(loader, swa, device=dev)
    print("swa", stats(swa), "nbt", [int(b) for n, b in swa.named_buffers() if n.endswith("num_batches_tracked")])
    swa.eval(); print("eval", f"{float(swa(xs[0]).sum()):.5f}")
    sys.exit(0)
m.train()
for i, x in enumerate(xs):
    if KIND == "functional":
        out = nn.functional.batch_norm(m(x), rm, rv, training=True, momentum=0.2)
        print(i, f"rm {float(rm.sum()):.5f} rv {float(rv.sum()):.5f}", flush=True)
    else:
        out = m(x); print(i, stats(m), flush=True)
    loss = out.pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
m.eval()
with torch.no_grad():
    ev = nn.functional.batch_norm(m(xs[0]), rm, rv, training=False) if KIND == "functional" else m(xs[0])
print("eval", f"{float(ev.sum()):.5f}")
