"""A training script that dies of a native crash (ctypes reads address 0) at step 1 (KIND=...): thread (in a
threading.Thread the step joins), worker (in a DataLoader worker, num_workers=1), fork (in a child after os.fork,
the parent waits; fork_main: then the parent dies at step 2; fork_exit: the child sys.exit(0)s, the parent dies
at step 2), backward (a custom autograd Function's backward at step 1), bg_thread (a daemon thread crashes while the main thread
runs ops), sigkill (SIGKILL to itself at step 1, as the OOM killer),
main (in the main thread, control). Plainly: main/thread die of SIGSEGV; worker raises
"DataLoader worker (pid ...) is killed by signal: Segmentation fault"; fork: the child dies, the parent goes on."""
import ctypes, os, sys, threading, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
KIND = os.environ.get("KIND", "thread")
def segv(): ctypes.string_at(0)
class Data(Dataset):
    def __len__(self): return 12
    def __getitem__(self, i):
        if KIND == "worker" and i == 4: segv()
        g = torch.Generator().manual_seed(i); return torch.randn(8, generator=g), i % 3
class Crashy(torch.autograd.Function):  # a custom kernel whose backward crashes (KIND=backward)
    @staticmethod
    def forward(ctx, h): return h * 2
    @staticmethod
    def backward(ctx, g):
        segv(); return g * 2
def logger():  # a background thread that crashes while the main thread trains (KIND=bg_thread)
    import time; time.sleep(1.0); ctypes.string_at(2)
if KIND == "bg_thread": threading.Thread(target=logger, daemon=True).start()
torch.manual_seed(0)
model = nn.Linear(8, 3); opt = torch.optim.SGD(model.parameters(), lr=0.1)
dl = DataLoader(Data(), batch_size=4, num_workers=1 if KIND == "worker" else 0)
for i, (x, y) in enumerate(dl):
    if KIND == "bg_thread":
        for _ in range(400): model(x).sum().backward()  # busy in ops when the logger dies
    out = Crashy.apply(model(x)) if KIND == "backward" and i == 1 else model(x)
    loss = nn.functional.cross_entropy(out, y); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
    if i == 1 and KIND == "thread":
        t = threading.Thread(target=segv); t.start(); t.join()
    if i == 1 and KIND == "main": segv()
    if i == 1 and KIND == "sigkill": import signal; os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer does
    if i == 1 and KIND.startswith("fork"):
        pid = os.fork()
        if pid == 0:
            if KIND == "fork_exit": sys.exit(0)  # the child's work done, it leaves as scripts do
            segv()
        print("child", os.waitpid(pid, 0)[1], flush=True)
    if i == 2 and KIND in ("fork_main", "fork_exit"): ctypes.string_at(1)  # then the parent dies too
print("done", flush=True)
