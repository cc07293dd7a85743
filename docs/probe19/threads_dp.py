"""Hand-rolled data parallel: a ThreadPoolExecutor runs the forward of each shard and writes it into an offset
slice of one output buffer; torch.func.vmap per-sample norms in a worker too; the main thread backprops.
Prints losses, a grad checksum and the threads' wall time."""
import os, sys, time, torch
from concurrent.futures import ThreadPoolExecutor
from torch import nn
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
if os.environ.get("DEV") == "dml":
    import torch_directml; dev = torch_directml.device()
model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 8)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 32, device=dev); y = torch.randn(64, 8, device=dev)
pool = ThreadPoolExecutor(4)
if os.environ.get("PREWARM"): list(pool.map(lambda i: time.sleep(0.2), range(4)))   # threads started before any op
stage = ThreadPoolExecutor(1)   # a pipeline stage: one thread, so autograd's graph is built by one thread at a time
def shard(i, out):
    out[i * 16:(i + 1) * 16] = model(x[i * 16:(i + 1) * 16])     # in-place write into an offset view
def norms(t):
    def f(r):
        c = r.clone(); c[1:].mul_(2)            # in-place into an offset view, inside vmap
        return c.norm()
    g = torch.func.vmap(torch.func.grad(lambda w, r: (f(r * w)) ** 2), in_dims=(None, 0))(torch.tensor(1.5, device=t.device), t)
    return torch.func.vmap(f)(t) + g
for step in range(5):
    out = torch.empty(64, 8, device=dev)
    t0 = time.perf_counter()
    for i in range(4):
        stage.submit(shard, i, out).result()
    buf = torch.empty(64, 32, device=dev)
    list(pool.map(lambda i: buf[i * 16:(i + 1) * 16].copy_(x[i * 16:(i + 1) * 16] * 2), range(4)))   # a no-grad prefetch into offset slices
    assert torch.equal(buf, x * 2)
    vn = pool.submit(norms, x.detach()).result()
    loss = nn.functional.mse_loss(out, y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(step, f"{loss.item():.6f}", f"{model[0].weight.grad.abs().sum().item():.6f}", f"{vn.sum().item():.4f}", flush=True)
# many tiny ops in threads: their speed under dmlprof
def tiny(n):
    a = torch.zeros(100, device=dev)
    for k in range(n):
        a[k % 50 + 1:].add_(1.0)
    return a.sum().item()
t0 = time.perf_counter(); tiny(3000); print(f"main_s={time.perf_counter() - t0:.2f}", file=sys.stderr)
t0 = time.perf_counter()
r = list(pool.map(tiny, [3000] * 4))
print("tiny", r, f"threads_s={time.perf_counter() - t0:.2f}", file=sys.stderr)
