"""torchvision ResNet-50 (random weights), 10 classes on 3x64x64 images; SGD with momentum (the default)."""
import torch
import torchvision

BATCH_SIZE = 2
IMAGE = 64


def build_model():
    torch.manual_seed(0)
    return torchvision.models.resnet50(weights=None, num_classes=10)


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 3, IMAGE, IMAGE, generator=generator)
    return images, torch.randint(0, 10, (batch_size,), generator=generator)
