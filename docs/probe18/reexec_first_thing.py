import os, sys
if os.environ.get("MY_OMP_SET") != "1":      # re-exec with the environment a library needs
    os.environ["MY_OMP_SET"] = "1"; os.environ["OMP_NUM_THREADS"] = "1"
    os.execv(sys.executable, [sys.executable] + sys.argv)
import torch, torch.nn as nn
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
m = nn.Linear(8, 2).to(dev); opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(4, 8, device=dev)
for i in range(5):
    loss = m(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    print(i, round(loss.item(), 6), flush=True)
