"""ResNet-18 for ImageNet-sized images (3x224x224, 1000 classes), written from scratch.

The standard architecture (He et al., 2015): a 7x7 stem, max-pool, four stages
of two BasicBlocks each (64, 128, 256, 512 channels), BatchNorm after every
convolution, in-place ReLU, adaptive average pooling and a 1000-way linear
classifier. About 11.7 M parameters, random weights, synthetic images.
"""
import torch
from torch import nn

BATCH_SIZE = 8


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (1x1 projection when the shape changes)."""

    expansion = 1

    def __init__(self, in_channels: int, channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(channels),
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000, layers=(2, 2, 2, 2)):
        super().__init__()
        self.in_channels = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._stage(64, layers[0], stride=1)
        self.layer2 = self._stage(128, layers[1], stride=2)
        self.layer3 = self._stage(256, layers[2], stride=2)
        self.layer4 = self._stage(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * BasicBlock.expansion, classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def _stage(self, channels: int, blocks: int, stride: int) -> nn.Sequential:
        stage = [BasicBlock(self.in_channels, channels, stride)]
        self.in_channels = channels * BasicBlock.expansion
        stage += [BasicBlock(self.in_channels, channels) for _ in range(1, blocks)]
        return nn.Sequential(*stage)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_model():
    torch.manual_seed(0)
    return ResNet18()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 3, 224, 224, generator=generator)
    labels = torch.randint(0, 1000, (batch_size,), generator=generator)
    return images, labels
