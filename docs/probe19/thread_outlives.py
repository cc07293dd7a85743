"""A background thread (started at step 1) writes into offset views of a counter every 20 ms for ~3 s, across the
end of the recorded window; the main thread trains 8 steps, then joins it and prints the counter."""
import threading, time, torch
from torch import nn
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Linear(8, 2).to(dev); opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(16, 8, device=dev)
acc = torch.zeros(10, device=dev)
def worker():
    for k in range(150):
        acc[1 + k % 5:].add_(1.0)          # in-place into an offset view
        acc[: 2].mul_(1.0)
        time.sleep(0.02)
t = None
for i in range(8):
    if i == 1:
        t = threading.Thread(target=worker); t.start()
    loss = m(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    print(i, round(loss.item(), 6), flush=True)
    time.sleep(0.3)
t.join()
print("acc", acc.tolist())
