"""Re-probe 14, case 11: a model file whose build_model returns a torch.compile'd model, predicted for a target.

    PYTHONPATH=. python -m dmlprof scan docs/probe14/compiled_model_predicted.py --target xpu     (or mps, dml, dml,xpu,mps)
    PYTHONPATH=. python -m dmlprof check docs/probe14/compiled_model_predicted.py --target dml

exit 3, "step 1 raised InductorError: LoweringException: AssertionError:" on torch 2.13 for every target (torch 2.4.1,
--target dml: "raised BackendCompilerFailed: backend='inductor' raised:"); the side-by-side run gives each target
"no call fails before the step raised". Inductor fails on the prediction's own stand-in tensors, and the failure is
read as the model's. The same file scans on the CPU (exit 0); real XPU and MPS have Inductor backends; on real
torch-directml (torch 2.4.1) a compiled Sequential that takes device tensors runs (re-probe 14 case 7;
Dynamo graph-breaks at the device tensors), and the emulated device says its
known compile error (exit 4). The re-probe 13 fix (fakes_as_on_directml) covers the emulated and real devices, not
the predicted one.
"""
import torch
import torch.nn as nn

BATCH_SIZE = 8


def build_model():
    torch.manual_seed(0)
    return torch.compile(nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 3)))


def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 10, generator=g), torch.randint(0, 3, (batch_size,), generator=g)
