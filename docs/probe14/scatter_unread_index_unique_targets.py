"""scatter_add with unique targets (a permutation) and an index of 2^24 + 8 elements: exact on DirectML"""
import torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
n = (1 << 24) + 8
g = torch.Generator().manual_seed(0)
perm = torch.randperm(n, generator=g).to(dev)
src = torch.ones(n, device=dev, requires_grad=True)
for step in range(2):
    out = torch.zeros(n, device=dev).scatter_add(0, perm, src * 2)
    loss = out.mean(); loss.backward()
    print("max", out.max().item(), "loss", round(loss.item(), 4))
