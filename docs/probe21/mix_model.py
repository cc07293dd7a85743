"""A device tensor meeting a CPU tensor that Module.to left behind (a plain attribute) in one op (KIND=...):
ln (F.layer_norm, CPU weight), gn (F.group_norm, CPU weight), bn_affine (F.batch_norm eval, CPU weight/bias),
inorm (F.instance_norm with CPU running stats, training). `python mix_model.py dml` on realdml."""
import os, sys, torch
from torch import nn
import torch.nn.functional as F
BATCH_SIZE = 8
KIND = os.environ.get("KIND", "ln")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(4, 6); self.head = nn.Linear(6, 3)
        self.w, self.b = torch.ones(6), torch.zeros(6)  # plain attributes: stay on the CPU
        self.rm, self.rv = torch.zeros(6), torch.ones(6)
    def forward(self, x):
        h = self.lin(x)
        if KIND == "ln": h = F.layer_norm(h, (6,), self.w, self.b)
        elif KIND == "gn": h = F.group_norm(h, 2, self.w, self.b)
        elif KIND == "bn_affine": h = F.batch_norm(h, None, None, self.w, self.b, training=True)
        elif KIND == "inorm": h = F.instance_norm(h.unsqueeze(-1).expand(-1, -1, 3), self.rm, self.rv, use_input_stats=True).mean(-1)
        return self.head(h)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 4) * 3 + 1, torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
