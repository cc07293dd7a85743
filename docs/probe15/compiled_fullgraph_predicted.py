"""Re-probe 15: a model file compiled with `fullgraph=True`, predicted on torch 2.13, fails as the model's error.

    PYTHONPATH=. python -m dmlprof scan docs/probe15/compiled_fullgraph_predicted.py --target xpu   (or mps, dml)

exit 3, "step 1 raised RuntimeError: torch.compile with fullgraph=True found no compiled frames. Compilation was not
attempted and no cached compiled code was found." The same file scans on the CPU (exit 0), and on torch 2.4.1 the
prediction runs it eagerly with the compile note (exit 0). The re-probe 14 fix turns Dynamo off for the prediction
(`torch._dynamo.config.disable`, dmlprof/predict/compiled.py); newer torch treats a `fullgraph=True` call that
compiled no frame as an error, so every model asking for one graph (common with `mode="max-autotune"`, and any
`@torch.compile(fullgraph=True)` helper, as in `-- helper`) now fails under every prediction.
"""
import sys

import torch
import torch.nn as nn

BATCH_SIZE = 8


@torch.compile(fullgraph=True)
def gelu_mix(x):
    return torch.nn.functional.gelu(x) * 0.5 + x * 0.5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(10, 32), nn.Linear(32, 3)

    def forward(self, x):
        return self.b(gelu_mix(self.a(x)))


def build_model():
    torch.manual_seed(0)
    if sys.argv[1:] == ["helper"]:
        return Net()
    return torch.compile(nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 3)), fullgraph=True)


def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 10, generator=g), torch.randint(0, 3, (batch_size,), generator=g)
