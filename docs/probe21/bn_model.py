"""BatchNorm in a model file (KIND=cpu_stats: its statistics plain CPU attributes handed to F.batch_norm with device
input in training; func_call: torch.func.functional_call of a BatchNorm with a dict of its buffers, which the
forward reads back). `python bn_model.py dml` trains on realdml; PROBE lines on stderr."""
import os, sys, torch
from torch import nn
BATCH_SIZE = 8
KIND = os.environ.get("KIND", "cpu_stats")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(4, 6); self.bn = nn.BatchNorm1d(6); self.head = nn.Linear(6, 3)
        self.rm, self.rv = torch.zeros(6), torch.ones(6)  # plain attributes: Module.to leaves them on the CPU
    def forward(self, x):
        h = self.lin(x)
        if KIND == "cpu_stats":
            h = nn.functional.batch_norm(h, self.rm, self.rv, training=True)
            print("PROBE rm", f"{float(self.rm.sum()):.5f}", file=sys.stderr)
        else:
            bufs = {k: v.clone() for k, v in self.bn.named_buffers()}
            h = torch.func.functional_call(self.bn, {**dict(self.bn.named_parameters()), **bufs}, (h,))
            print("PROBE func rm", f"{float(bufs['running_mean'].sum()):.5f}", "module rm", f"{float(self.bn.running_mean.sum()):.5f}", file=sys.stderr)
        return self.head(h)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 4) * 3 + 1, torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
