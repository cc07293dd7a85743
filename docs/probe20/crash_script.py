"""A CUDA-style training script that dies natively at step AT (CRASH=segv: ctypes null read; abort_thread: os.abort()
in a worker thread; sigkill: SIGKILL to itself; atexit_sleep: no crash, an exit handler that sleeps 30 s)."""
import atexit, ctypes, os, signal, sys, threading, time, torch
from torch import nn
CRASH = os.environ.get("CRASH", "segv"); AT = int(os.environ.get("AT", "2")); STEPS = int(os.environ.get("STEPS", "6"))
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(dev); opt = torch.optim.Adam(m.parameters(), 1e-2)
x = torch.randn(32, 8, device=dev); y = torch.randn(32, 1, device=dev)
if CRASH == "atexit_sleep":
    atexit.register(lambda: (print("exit handler: sleeping", flush=True), time.sleep(30), print("exit handler done", flush=True)))
for i in range(STEPS):
    loss = nn.functional.mse_loss(m(x), y); opt.zero_grad(); loss.backward()
    if i == AT:
        if CRASH == "segv": ctypes.string_at(0)
        elif CRASH == "abort_thread": t = threading.Thread(target=os.abort); t.start(); t.join()
        elif CRASH == "sigkill": os.kill(os.getpid(), signal.SIGKILL)
    opt.step(); print(i, f"{loss.item():.6f}", flush=True)
