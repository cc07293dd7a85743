"""A model whose forward, on one target's device type (TGT: privateuseone, xpu or mps), does ACTION: segv (ctypes),
abort (os.abort), exit0 (os._exit(0)), sysexit0 (sys.exit(0)), sleep (120 s, for a signal from outside)."""
import ctypes, os, sys, time, torch
from torch import nn
BATCH_SIZE = 4
TGT, ACTION = os.environ.get("TGT", "xpu"), os.environ.get("ACTION", "segv")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(8, 4)
    def forward(self, x):
        if x.device.type == TGT:
            if ACTION == "segv": ctypes.string_at(0)
            elif ACTION == "abort": os.abort()
            elif ACTION == "exit0": os._exit(0)
            elif ACTION == "sysexit0": sys.exit(0)
            elif ACTION == "sleep": time.sleep(120)
        return self.l(x)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randn(n, 8), torch.randint(0, 4, (n,))
