"""A device tensor meeting a CPU tensor that Module.to left behind (a plain attribute) in one op (KIND=...):
ln (F.layer_norm, CPU weight), gn (F.group_norm, CPU weight), bn_affine (F.batch_norm eval, CPU weight/bias),
inorm (F.instance_norm with CPU running stats, training),
linear_bias (F.linear, CPU bias), emb (F.embedding, CPU weight), prelu (CPU weight), where (CPU other), add, mul_ (a CPU operand), where0d (a 0-d CPU tensor as torch.where's other),
masked_fill0d, mul0d, clamp0d (a 0-d CPU tensor as the value, operand, bound); where_indexless, prelu_indexless (a
tensor made on x.device.type: `privateuseone` without an index on DirectML). `python mix_model.py dml` on realdml."""
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
        elif KIND == "linear_bias": h = F.linear(h, torch.eye(6, device=h.device), self.b)
        elif KIND == "emb": h = h + F.embedding(torch.zeros(h.shape[0], dtype=torch.long, device=h.device), self.w.view(6, 1).expand(6, 6).contiguous())
        elif KIND == "prelu": h = F.prelu(h, self.w[:1])
        elif KIND == "where": h = torch.where(h > 0, h, self.b)
        elif KIND == "add": h = h + self.b
        elif KIND == "where_indexless": h = torch.where(h > 0, h, torch.zeros(6, device=h.device.type))
        elif KIND == "prelu_indexless": h = F.prelu(h, torch.full((1,), 0.2, device=h.device.type))
        elif KIND == "where0d": h = torch.where(h > 0, h, torch.tensor(-0.5))
        elif KIND == "masked_fill0d": h = h.masked_fill(h < 0, torch.tensor(-0.5))
        elif KIND == "mul0d": h = h * torch.tensor(2.0)
        elif KIND == "clamp0d": h = torch.clamp(h, min=torch.tensor(-0.5))
        elif KIND == "mul_": h = h * 1; h.mul_(self.w)
        elif KIND == "inorm": h = F.instance_norm(h.unsqueeze(-1).expand(-1, -1, 3), self.rm, self.rv, use_input_stats=True).mean(-1)
        return self.head(h)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 4) * 3 + 1, torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
