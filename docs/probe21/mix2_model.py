"""A device tensor meeting a CPU tensor in common ops (KIND=...): ce (F.cross_entropy with CPU targets), cat
(torch.cat with a CPU tensor), index (h[cpu_long_index]), mm (h @ cpu_matrix), gather (CPU index), emb_idx
(nn.Embedding on the device, CPU indices), layer_cpu (a CPU nn.Linear called on a device tensor: a sub-module kept in a
plain list, so Module.to never moved it). `python mix2_model.py dml` on realdml."""
import os, sys, torch
from torch import nn
import torch.nn.functional as F
BATCH_SIZE = 8
KIND = os.environ.get("KIND", "ce")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(4, 6); self.head = nn.Linear(6, 3); self.emb = nn.Embedding(6, 6)
        self.m = torch.eye(6); self.kept = [nn.Linear(6, 6)]  # not moved by Module.to
    def forward(self, x):
        h = self.lin(x)
        if KIND == "ce": h = h + 0 * F.cross_entropy(h, torch.zeros(h.shape[0], dtype=torch.long))
        elif KIND == "cat": h = torch.cat([h, torch.zeros(h.shape[0], 1)], 1)[:, :6]
        elif KIND == "index": h = h[torch.arange(h.shape[0])]
        elif KIND == "mm": h = h @ self.m
        elif KIND == "gather": h = h.gather(1, torch.zeros(h.shape[0], 6, dtype=torch.long))
        elif KIND == "emb_idx": h = h + self.emb(torch.zeros(h.shape[0], dtype=torch.long))
        elif KIND == "layer_cpu": h = self.kept[0](h)
        return self.head(h)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 4) * 3 + 1, torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
