"""A CUDA script masking attention scores with a 0-d CPU tensor (`torch.where(mask, scores, torch.tensor(-1e4))`:
CUDA takes a 0-d CPU tensor as a scalar); `dml` arg: realdml."""
import sys, torch
from torch import nn
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
q = nn.Linear(8, 8).to(dev); opt = torch.optim.SGD(q.parameters(), lr=0.1)
x = torch.randn(2, 5, 8).to(dev); mask = torch.ones(5, 5, dtype=torch.bool).tril().to(dev)
for i in range(3):
    h = q(x); scores = h @ h.transpose(1, 2) / 8 ** 0.5
    scores = torch.where(mask, scores, torch.tensor(-1e4))
    loss = (scores.softmax(-1) @ h).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
