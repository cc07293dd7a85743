"""Checkpoints in a forward (KIND=dev: the device's state_dict + an optimizer-like nested state saved, reloaded with
weights_only=True, map_location=x.device; cpu: a CPU checkpoint loaded with map_location=x.device; views: a
state with two views of one storage, loaded, the views still sharing). The loaded tensors feed the output."""
import io, os, sys, torch
from torch import nn
KIND = os.environ.get("KIND", "dev")
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 3)
    def forward(self, x):
        buf = io.BytesIO(); dev = x.device
        if KIND == "dev":
            w = self.lin.weight.detach()
            torch.save({"sd": self.state_dict(), "opt": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": w.clone()}},
                        "param_groups": [{"lr": 0.1, "params": [0]}]}}, buf)
            buf.seek(0); ck = torch.load(buf, weights_only=True, map_location=dev)
            extra = (ck["sd"]["lin.weight"] + ck["opt"]["state"][0]["exp_avg"]).sum() * 0 + ck["opt"]["state"][0]["step"].to(dev) * 0
        elif KIND == "cpu":
            torch.save({"b": torch.ones(3)}, buf); buf.seek(0)
            ck = torch.load(buf, weights_only=True, map_location=dev); extra = ck["b"] * 0.1
            print("PROBE", ck["b"].device.type, flush=True)
        elif KIND == "views":
            base = self.lin.weight.detach().clone(); torch.save([base, base[0], base[:, 1]], buf); buf.seek(0)
            a, b, c = torch.load(buf, map_location=dev); a.zero_()
            print("PROBE", float(b.abs().sum()), float(c.abs().sum()), flush=True); extra = b.sum() * 0
        return self.lin(x) + extra
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
