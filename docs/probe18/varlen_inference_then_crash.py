import os, sys, random, time, torch, torch.nn as nn
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crashlib
random.seed(0); torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
m = nn.Sequential(nn.Embedding(100, 16), nn.Linear(16, 16), nn.GELU(), nn.LayerNorm(16)).to(dev).eval()
t0 = time.time(); n = 0
with torch.no_grad():
    for i in range(4000):                      # variable-length requests, no padding: a new shape each time
        L = random.randint(1, 6000)
        out = m(torch.randint(0, 100, (1, L), device=dev)).mean()
        n += 1
        if i % 1000 == 0: print(i, round(out.item(), 4), flush=True)
print("served", n, round(time.time() - t0, 1), flush=True)
crashlib.segv()
