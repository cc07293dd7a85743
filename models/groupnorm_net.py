"""A plain convolutional classifier with GroupNorm + SiLU blocks on 3x64x64 images (10 classes).

GroupNorm normalises over groups of channels within each sample, so it behaves
the same at any batch size (the reason diffusion U-Nets and small-batch
detectors use it instead of BatchNorm). Four stages of two conv-GroupNorm-SiLU
blocks, stride-2 convolutions between stages, global average pooling and a
linear head. Random weights, synthetic images, trained with AdamW.
"""
import torch
from torch import nn

BATCH_SIZE = 8
IMAGE_SIZE = 64
GROUPS = 8


def conv_block(in_channels: int, out_channels: int, stride: int = 1) -> nn.Sequential:
    """3x3 convolution, GroupNorm, SiLU."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
        nn.GroupNorm(GROUPS, out_channels),
        nn.SiLU(),
    )


class GroupNormNet(nn.Module):
    def __init__(self, classes: int = 10, widths=(32, 64, 128, 256)):
        super().__init__()
        stages = []
        in_channels = 3
        for index, width in enumerate(widths):
            stride = 1 if index == 0 else 2
            stages.append(nn.Sequential(conv_block(in_channels, width, stride), conv_block(width, width)))
            in_channels = width
        self.features = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(in_channels, classes)

    def forward(self, images):
        return self.head(torch.flatten(self.pool(self.features(images)), 1))


def build_model():
    torch.manual_seed(0)
    return GroupNormNet()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    labels = torch.randint(0, 10, (batch_size,), generator=generator)
    return images, labels


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
