"""torchvision Swin-T (random weights): shifted windows (roll), relative position bias, stochastic depth; AdamW.

64x64 inputs; Swin pads each stage to whole 7x7 windows.
"""
import torch
import torchvision

BATCH_SIZE = 2
IMAGE = 64


def build_model():
    torch.manual_seed(0)
    return torchvision.models.swin_t(weights=None, num_classes=10)


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 3, IMAGE, IMAGE, generator=generator)
    return images, torch.randint(0, 10, (batch_size,), generator=generator)


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05)
