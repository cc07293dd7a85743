"""torch.compile idioms in a model (KIND=...); `python compile_model.py dml` trains on realdml."""
import os, sys, types, dataclasses, collections, torch
from torch import nn
import torch.nn.functional as F
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "builtin_gelu")
@dataclasses.dataclass
class Feats:
    h: torch.Tensor
def helper_ns(ns): return F.gelu(ns.h) * 2 + 1
def helper_dc(d): return F.gelu(d.h) * 2 + 1
def helper_ud(d): return F.gelu(d["h"]) * 2 + 1
class Own(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 8)
    def forward(self, h): return F.gelu(self.lin(h))
@torch.compiler.disable
def eager_part(h): return h * 2
class OwnDisabled(nn.Module):
    def forward(self, h): return eager_part(h) + 1
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(8, 8); self.head = nn.Linear(8, 3)
        self.own = Own(); self.od = OwnDisabled()
        if KIND == "builtin_gelu": self.block = torch.compile(F.gelu)
        elif KIND == "builtin_sdpa": self.block = torch.compile(F.scaled_dot_product_attention)
        elif KIND == "builtin_matmul": self.block = torch.compile(torch.matmul)
        elif KIND == "namespace": self.block = torch.compile(helper_ns, backend="aot_eager")
        elif KIND == "dataclass": self.block = torch.compile(helper_dc, backend="aot_eager")
        elif KIND in ("userdict", "batchencoding"): self.block = torch.compile(helper_ud, backend="aot_eager")
        elif KIND == "reduce_overhead": self.block = torch.compile(self.own, mode="reduce-overhead")
        elif KIND == "disabled_inner": self.block = torch.compile(self.od, backend="aot_eager")
        elif KIND == "bound_forward": self.block = torch.compile(self.own.forward, backend="aot_eager")
    def forward(self, x):
        h = self.lin(x)
        if KIND == "builtin_sdpa":
            q = h.view(x.shape[0], 1, 2, 4); h = self.block(q, q, q).reshape(x.shape[0], 8)
        elif KIND == "builtin_matmul": h = self.block(h, torch.eye(8, device=h.device) if False else h.t() @ h * 0.01)
        elif KIND == "namespace": h = self.block(types.SimpleNamespace(h=h))
        elif KIND == "dataclass": h = self.block(Feats(h))
        elif KIND == "userdict": h = self.block(collections.UserDict(h=h))
        elif KIND == "batchencoding":  # an HF tokenizer's output (a UserDict) handed to a compiled helper
            from transformers import BatchEncoding; h = self.block(BatchEncoding({"h": h}))
        else: h = self.block(h)
        return self.head(h)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
