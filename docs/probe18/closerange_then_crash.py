import os, sys, torch, torch.nn as nn
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crashlib
os.closerange(3, 65536)          # a daemonising helper closes every inherited descriptor
logs = [open(f"/tmp/t05_log{i}.txt", "w") for i in range(4)]
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
m = nn.Linear(8, 2).to(dev); opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(4, 8, device=dev)
for i in range(6):
    loss = m(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    print(i, round(loss.item(), 6), flush=True)
    for f in logs: f.write(f"step {i}\n"); f.flush()
    if i == 2:
        crashlib.segv()
