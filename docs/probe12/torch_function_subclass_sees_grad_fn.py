"""Re-probe 12 cases 2-3: a __torch_function__ tensor subclass that refuses what it was not written for.
plain python: "final -0.367662", exit 0.
dmlprof scan this.py --run-to-end: exit 3 "raised TypeError: Strict tensor: getset_descriptor.__get__ not allowed":
dmlprof's module hooks read `.grad_fn` of each module output (dmlprof/record/attribution.py), which goes through
the subclass's __torch_function__ (a counting subclass sees 2 extra calls per module output)."""
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
ALLOWED = {F.linear, torch.Tensor.pow, torch.Tensor.mean, torch.Tensor.backward, torch.Tensor.__add__, torch.Tensor.add}
class Strict(torch.Tensor):
    """A units-checking tensor that refuses anything it was not written for."""
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func not in ALLOWED:
            raise TypeError(f"Strict tensor: {getattr(func, '__qualname__', func)} not allowed")
        return super().__torch_function__(func, types, args, kwargs or {})
m = nn.Linear(4, 3); opt = torch.optim.SGD(m.parameters(), 0.1)
for step in range(4):
    z = torch.randn(6, 4).as_subclass(Strict)
    loss = m(z).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("final", round(m.weight.sum().item(), 6))
