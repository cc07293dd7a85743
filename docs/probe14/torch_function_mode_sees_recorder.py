"""Re-probe 14, case 16: the script's own TorchFunctionMode sees dmlprof's reads.

    python docs/probe14/torch_function_mode_sees_recorder.py            -> "mode saw 9 calls"
    PYTHONPATH=. python -m dmlprof scan docs/probe14/torch_function_mode_sees_recorder.py --device cpu --run-to-end
                                                                         -> "mode saw 12 calls"

The extra call, once per module call, is `getset_descriptor.__get__` of `grad_fn`: dmlprof/record/attribution.py
reads `t.grad_fn` of a module's output (a `__torch_function__` subclass here) while the script's mode is active, so
the mode intercepts it. Values are unchanged; what the mode logs, counts or transforms is not the script's.
"""
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode


class Logged(torch.Tensor):
    pass


class Count(TorchFunctionMode):
    seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        Count.seen.append(getattr(func, "__qualname__", str(func)))
        return func(*args, **(kwargs or {}))


torch.manual_seed(0)
m = nn.Linear(4, 3)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(5, 4).as_subclass(Logged)
    with Count():
        loss = m(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, round(loss.item(), 5))
print("mode saw", len(Count.seen), "calls:", sorted(set(Count.seen)))
