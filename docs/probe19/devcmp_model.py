"""Compares devices as HF/lightning code does."""
import torch, sys
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(8, 4); self.done = False
    def forward(self, x):
        if not self.done:
            self.done = True
            for name, f in [("torch.device('mps')", lambda: torch.device("mps")),
                            ("torch.device('mps').type", lambda: torch.device("mps").type),
                            ("torch.device('mps:0')", lambda: torch.device("mps:0")),
                            ("x.device == torch.device('mps:0')", lambda: x.device == torch.device("mps:0")),
                            ("x.device.type == torch.device('mps').type", lambda: x.device.type == torch.device("mps").type),
                            ("torch.device('xpu')", lambda: torch.device("xpu")),
                            ("torch.device(x.device).type", lambda: torch.device(x.device).type),
                            ("torch.device(str(x.device))", lambda: torch.device(str(x.device))),
                            ("p.device == x.device", lambda: self.l.weight.device == x.device),
                            ("x.to('mps') is x", lambda: x.to("mps") is x),
                            ("x.to(x.device) is x", lambda: x.to(x.device) is x),
                            ]:
                try: print("PROBE", name, "->", f(), file=sys.stderr)
                except Exception as e: print("PROBE", name, "RAISES", type(e).__name__, e, file=sys.stderr)
        return self.l(x)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randn(n, 8), torch.randint(0, 4, (n,))
