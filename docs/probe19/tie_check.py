import torch, sys
from torch import nn
dev = "cuda" if torch.cuda.is_available() else "cpu"
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
emb = nn.Embedding(10, 8); out = nn.Linear(8, 10, bias=False); out.weight = emb.weight
m = nn.ModuleDict(dict(emb=emb, out=out)).to(dev)
print("tied after .to:", m["out"].weight is m["emb"].weight, "compatible:", torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device=dev)))
o = torch.optim.SGD(m.parameters(), lr=0.1)
m["out"](m["emb"](torch.ones(1, dtype=torch.long, device=dev))).sum().backward(); o.step()
print("still tied after a step:", torch.equal(m["out"].weight.cpu(), m["emb"].weight.cpu()))
