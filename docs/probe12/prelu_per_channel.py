"""Re-probe 12: nn.PReLU(num_parameters=C) on a conv's output (ESPCN, ENet, MobileFaceNet do this).
On real torch-directml 0.2.5 (realdml) the forward ends the process: `Check failed: rank <=
DML_TENSOR_DIMENSION_COUNT_MAX` (SIGABRT) for 4-D and 5-D inputs; a 2-D or 3-D input raises a wrong
broadcast ("The size of tensor a (4) must match the size of tensor b (8)"). nn.PReLU() (one parameter) runs.
`dmlprof scan this.py --target dml` says every call runs on the device; `check --target dml` passes;
`--device emulated-dml` trains; `--target dml --confirm` (realdml) reads "contradicted ... aborts"."""
import torch
from torch import nn

BATCH_SIZE = 4


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(8), nn.Flatten(), nn.Linear(8 * 6 * 6, 5))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 3, 6, 6, generator=generator), torch.randint(0, 5, (batch_size,), generator=generator)
