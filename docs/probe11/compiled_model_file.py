# Probe 11, High (same defect as compile_under_error_filter.py), in a CI's terms: with warnings as errors in the
# environment, a compiled model file fails every scan and check on torch 2.13; plain python trains it.
# PYTHONWARNINGS=error::UserWarning python -m dmlprof check compiled_model_file.py --target dml
#   -> exit 3 "step 1 raised UserWarning: Using `torch.compile(module)` when there are global hooks on modules"
# PYTHONWARNINGS=error::UserWarning python -c "import torch, compiled_model_file as c; m = c.build_model(); \
#   x, y = c.make_batch(8); torch.nn.functional.cross_entropy(m(x), y).backward(); print('ok')"   -> ok
"""A compiled MLP as a model file."""
import torch
from torch import nn
BATCH_SIZE = 8
def build_model():
    torch.manual_seed(0)
    return torch.compile(nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 4)), backend="eager")
def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 20, generator=g), torch.randint(0, 4, (batch_size,), generator=g)
