"""Re-probe 12 case 1: a strided nested tensor (torch.nested.nested_tensor's default layout) in a script.
plain python: prints the two sums and "final ...", exit 0.
dmlprof scan this.py --run-to-end: exit 3 "raised RuntimeError: Internal error: NestedTensorImpl doesn't support
sizes" at the nested_tensor line (dmlprof/record/recorder.py _facts reads tuple(tensor.shape) of the output)."""
import torch
from torch import nn

torch.manual_seed(0)
nt = torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)])
print([round(t.sum().item(), 4) for t in (nt * 2).unbind()])
model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), 0.1)
for step in range(4):
    loss = (model(torch.randn(5, 8)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("final", round(model.weight.sum().item(), 5))
