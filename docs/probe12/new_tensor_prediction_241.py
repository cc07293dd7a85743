"""Re-probe 12: `h.new_tensor(2.0)` in a model's forward, `--target dml` on torch 2.4.1 (torch-directml 0.2.5's pin).
~/.cache/dmlprof/venv-torch2.4.1/bin/python -m dmlprof scan this.py --target dml (or check --target dml, or
--confirm on realdml): exit 3, "step 1 raised RuntimeError: Tensor on device meta is not on the expected device
privateuseone:0!" at the new_tensor line: a failure of the prediction's stand-in device, presented as the model's.
Real torch-directml runs it; on torch 2.13 the prediction runs; `--device emulated-dml` (2.4.1) runs.
`h + h.new_tensor([2.0])` and `torch.where(h > 0, h, h.new_tensor(-1.0))` fail the same way;
`h.new_tensor(3.0).expand_as(h) + h` says "Tensor on device privateuseone:0 is not on the expected device meta!"."""
import torch, torch.nn as nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(6, 3)
    def forward(s, x):
        h = s.fc(x)
        return h * h.new_tensor(2.0)
def build_model():
    torch.manual_seed(0); return Net()
def make_batch(n):
    return torch.randn(n, 6), torch.randint(0, 3, (n,))
