"""Generators beside the device (KIND=subclass: a torch.Generator subclass with a method, made in forward;
subclass_cpu: the same on the CPU; pickle: pickle/deepcopy of a device generator; randperm: randperm(n, generator=g,
device=x.device); multinomial; dropout_g: bernoulli_ with g; state: get_state/set_state replay; typeis:
type(g) is torch.Generator). `python gen23_model.py dml` trains on realdml."""
import copy, os, pickle, sys, torch
from torch import nn
KIND = os.environ.get("KIND", "subclass")
BATCH_SIZE = 4
class SeededGen(torch.Generator):
    def reseed(self, s): self.manual_seed(s); return self
class Net(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 3)
    def forward(self, x):
        dev = x.device
        if KIND == "subclass":
            g = SeededGen(device=dev).reseed(1); noise = torch.randn(x.shape, device=dev, generator=g)
        elif KIND == "subclass_cpu":
            g = SeededGen().reseed(1); noise = torch.randn(x.shape, generator=g).to(dev)
        elif KIND == "subclass_in_fwd":
            class G2(torch.Generator):
                def reseed(self, s): self.manual_seed(s); return self
            g = G2(device=dev).reseed(1); noise = torch.randn(x.shape, device=dev, generator=g)
        elif KIND == "pickle":
            g = torch.Generator(device=dev); g.manual_seed(1)
            g2 = pickle.loads(pickle.dumps(g)); g3 = copy.deepcopy(g)
            noise = torch.randn(x.shape, device=dev, generator=g2) + torch.randn(x.shape, device=dev, generator=g3)
        elif KIND == "randperm":
            g = torch.Generator(device=dev).manual_seed(1)
            noise = torch.randperm(x.shape[1], generator=g, device=dev).float().view(1, -1) * 0.01
        elif KIND == "multinomial":
            g = torch.Generator(device=dev).manual_seed(1)
            idx = torch.multinomial(torch.ones(x.shape[1], device=dev), 4, generator=g)
            noise = torch.zeros_like(x).index_fill(1, idx, 0.1)
        elif KIND == "dropout_g":
            g = torch.Generator(device=dev).manual_seed(1)
            noise = torch.empty_like(x).bernoulli_(0.5, generator=g) * x - x
        elif KIND == "state":
            g = torch.Generator(device=dev).manual_seed(1); st = g.get_state()
            a = torch.rand(x.shape, device=dev, generator=g); g.set_state(st)
            b = torch.rand(x.shape, device=dev, generator=g); assert torch.equal(a.cpu(), b.cpu()); noise = a * 0.1
        elif KIND == "typeis":
            g = torch.Generator(device=dev); print("PROBE", type(g) is torch.Generator, g.device, flush=True)
            noise = torch.randn(x.shape, device=dev, generator=g.manual_seed(1))
        return self.lin(x + 0.1 * noise)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
