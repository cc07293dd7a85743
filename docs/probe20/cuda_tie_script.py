"""A CUDA training script checking tied weights by data_ptr after .to(device) (HF tie check style) and logging
parameter memory by untyped_storage().nbytes() (a memory estimator); KIND=tie or mem."""
import os, sys, torch
from torch import nn
KIND = os.environ.get("KIND", "tie")
dev = "cuda" if torch.cuda.is_available() else "cpu"
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
emb = nn.Embedding(10, 8); head = nn.Linear(8, 10, bias=False); head.weight = emb.weight
m = nn.ModuleDict(dict(emb=emb, head=head)).to(dev)
if KIND == "tie": print("tied by data_ptr:", m["head"].weight.data_ptr() == m["emb"].weight.data_ptr())
else: print("param bytes:", sum(p.untyped_storage().nbytes() for p in m.parameters()))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randint(0, 10, (4, 5), device=dev)
for i in range(3):
    loss = nn.functional.cross_entropy(m["head"](m["emb"](x)).flatten(0, 1), x.flatten())
    opt.zero_grad(); loss.backward(); opt.step(); print(i, f"{loss.item():.6f}")
