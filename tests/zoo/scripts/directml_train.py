"""A DirectML training script, as torch-directml's samples write one: ``dml = torch_directml.device()``.

A small residual CNN on synthetic 3x32x32 images, 50 epochs of 100 batches
(5,000 optimizer steps), Adam, a log line every 100 steps.
"""
import time

import torch
import torch.nn.functional as F
import torch_directml
from torch import nn

dml = torch_directml.device()
EPOCHS = 50
BATCHES = 100
BATCH = 16


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class Net(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(Block(16), nn.MaxPool2d(2), Block(16))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


def main():
    torch.manual_seed(0)
    print(f"training on {torch_directml.device_name(torch_directml.default_device())}")
    model = Net().to(dml)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    started = time.time()
    step = 0
    for epoch in range(EPOCHS):
        for _ in range(BATCHES):
            images = torch.randn(BATCH, 3, 32, 32, generator=generator).to(dml)
            labels = torch.randint(0, 10, (BATCH,), generator=generator).to(dml)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 100 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f} ({time.time() - started:.1f} s)")


if __name__ == "__main__":
    main()
