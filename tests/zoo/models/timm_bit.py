"""timm BiT ResNetV2-50x1 (random weights): GroupNorm and weight-standardised convolutions; SGD with momentum."""
import timm
import torch

BATCH_SIZE = 2
IMAGE = 64


def build_model():
    torch.manual_seed(0)
    return timm.create_model("resnetv2_50x1_bit", pretrained=False, num_classes=10)


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 3, IMAGE, IMAGE, generator=generator)
    return images, torch.randint(0, 10, (batch_size,), generator=generator)


def make_optimizer(params):
    return torch.optim.SGD(params, lr=0.01, momentum=0.9, nesterov=True)
