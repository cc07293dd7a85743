"""Re-probe 16: `--target mps` runs the model's non-MPS branch and predicts a failure real MPS never meets.

    python -m dmlprof scan docs/probe16/target_mps_device_type_branch.py --target mps

Expected: no failure. The timestep embedding below is diffusers' (UNet2DConditionModel.forward): on MPS it
builds the timesteps in float32 because MPS has no float64, elsewhere in float64. On a real MPS device
`sample.device.type == "mps"` and the step runs. In the prediction the stand-in's tensors say
`device.type == "privateuseone"` (printed below), so the float64 branch runs and dmlprof reports "FAILS ON THE
DEVICE ... Cannot convert a MPS Tensor to Float64 dtype" at line 33 (the `torch.tensor(..., dtype=float64, device=...)`) with exit 4 and the advice to cast: a line
that never runs on MPS. (`--target xpu` likewise sees "privateuseone", not "xpu".)
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 4


class TinyUNetBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.time_mlp = nn.Linear(16, 8)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.out = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, sample):
        timesteps = 10
        is_mps = sample.device.type == "mps"
        print("the model sees sample.device.type ==", repr(sample.device.type), flush=True)
        dtype = torch.float32 if is_mps else torch.float64           # diffusers' guard
        t = torch.tensor([timesteps], dtype=dtype, device=sample.device).expand(sample.shape[0])
        freqs = torch.exp(-math.log(10000) * torch.arange(8, device=sample.device) / 8)
        emb = t[:, None].float() * freqs[None]
        emb = torch.cat([emb.sin(), emb.cos()], dim=1)
        h = self.conv(sample) + self.time_mlp(emb)[:, :, None, None]
        return self.out(F.silu(h))


def build_model():
    torch.manual_seed(0)
    return TinyUNetBlock()


def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch_size, 3, 8, 8, generator=g)
    return x, torch.randn(batch_size, 3, 8, 8, generator=g)


def loss_fn(out, target):
    return F.mse_loss(out, target)
