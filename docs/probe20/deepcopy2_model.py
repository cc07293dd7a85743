"""copy.deepcopy inside the step, one idiom per KIND: a view and its base together, a leaf with .grad and a user
attribute, SWA's AveragedModel made lazily (deepcopy + BatchNorm buffers), a non-leaf (torch refuses), an EMA of a
state_dict updated by lerp_."""
import copy, os, sys, torch
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "views")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(8, 8); self.bn = nn.BatchNorm1d(8); self.head = nn.Linear(8, 3)
        self.avg = None; self.ema = None; self.calls = 0
    def forward(self, x):
        h = self.bn(torch.relu(self.lin(x))); self.calls += 1
        if KIND == "views":
            w = self.lin.weight.detach(); d = copy.deepcopy({"w": w, "row": w[0]})
            d["w"][0].fill_(7.0); print("PROBE views row0", float(d["row"].sum()), "w", float(d["w"].sum()), file=sys.stderr)
        elif KIND == "attr_grad":
            t = self.lin.weight.detach().clone().requires_grad_(); (t * 2).sum().backward(); t.tag = "mine"
            c = copy.deepcopy(t); print("PROBE attr_grad", c.tag, c.requires_grad, float(c.grad.sum()), c.device.type, file=sys.stderr)
        elif KIND == "swa":
            if self.avg is None: self.avg = torch.optim.swa_utils.AveragedModel(nn.Sequential(self.lin, self.bn))
            else: self.avg.update_parameters(nn.Sequential(self.lin, self.bn))
            print("PROBE swa", int(self.avg.n_averaged), float(self.avg.module[1].running_mean.sum()), file=sys.stderr)
        elif KIND == "nonleaf":
            try: copy.deepcopy(h)
            except RuntimeError as e: print("PROBE nonleaf", str(e)[:60], file=sys.stderr)
        elif KIND == "ema_sd":
            if self.ema is None: self.ema = copy.deepcopy({k: v.detach() for k, v in self.state_dict().items()})
            with torch.no_grad():
                for k, v in self.state_dict().items():
                    if v.dtype.is_floating_point: self.ema[k].lerp_(v, 0.1)
            print("PROBE ema", f"{float(sum(v.float().sum() for v in self.ema.values())):.5f}", file=sys.stderr)
        return self.head(h)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
