"""Re-probe 16: `--target mps` / `--target xpu` refuse torch.autocast with DirectML's reason and advice.

    python -m dmlprof scan docs/probe16/target_autocast_refused_as_directml.py --target mps
    python -m dmlprof scan docs/probe16/target_autocast_refused_as_directml.py --target xpu
    DMLPROF_PROBE16_LITERAL=1 python -m dmlprof scan docs/probe16/target_autocast_refused_as_directml.py --target mps

Expected: the step runs (torch registers autocast for MPS (float16, bfloat16) and XPU; torch.autocast("mps") and
"xpu" are documented device types). Got, for `device_type=x.device.type` (timm/diffusers style): exit 4 "mixed
precision (torch.autocast) does not run on this device: torch-directml registers no autocast kernels ... run the
step in float32 on DirectML: leave out torch.autocast and GradScaler" on both targets. With the literal
`torch.autocast("mps")` (set DMLPROF_PROBE16_LITERAL=1) the prediction silently runs the body in float32
(printed below: "torch.float32"), so no float16 call of the step is judged, and exits 0.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 4
LITERAL = os.environ.get("DMLPROF_PROBE16_LITERAL") == "1"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 3)

    def forward(self, x):
        device_type = "mps" if LITERAL else x.device.type
        with torch.autocast(device_type=device_type, dtype=torch.float16):
            h = F.relu(self.a(x))
            print("inside autocast:", h.dtype, "on", x.device.type, flush=True)
        return self.b(h.float())


def build_model():
    torch.manual_seed(0)
    return Net()


def make_batch(batch_size):
    return torch.randn(batch_size, 16), torch.randint(0, 3, (batch_size,))
