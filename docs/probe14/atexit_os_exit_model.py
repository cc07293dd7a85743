"""Re-probe 14, case 24: a model file whose build_model registers atexit(os._exit, 0); its forward calls torch.fft.

    PYTHONPATH=. python -m dmlprof check docs/probe14/atexit_os_exit_model.py --target dml     (or scan --target dml)

prints "error: step 1: complex tensors abort torch-directml ... (at aten::_fft_r2c ...)" and exits 0 (docs/exit_codes.md:
4 for a call that fails on the device; any os._exit of a contract file is 3): the handler's os._exit(0) at the
interpreter's exit replaces dmlprof's own status, so CI reads success.
"""
import atexit
import os

import torch
import torch.nn as nn

BATCH_SIZE = 4


class SpectralHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(5, 2)

    def forward(self, x):
        return self.l(torch.fft.rfft(x, dim=-1).abs())


def build_model():
    atexit.register(os._exit, 0)
    torch.manual_seed(0)
    return SpectralHead()


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 2, (batch_size,))
