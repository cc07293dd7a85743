"""LeNet-5 on 32x32 grey images (10 classes), the classic small conv net."""
import torch
from torch import nn

BATCH_SIZE = 64


class LeNet5(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(), nn.Linear(84, classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def build_model():
    torch.manual_seed(0)
    return LeNet5()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 1, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (batch_size,), generator=generator)
    return images, labels
