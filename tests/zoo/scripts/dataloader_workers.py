"""A small CNN fed by a DataLoader with two worker processes, shuffling, and pinned memory on CUDA.

The dataset synthesises each image in ``__getitem__`` (workers do the work);
batches go to the device with ``non_blocking=True`` as CUDA users write it.
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Shapes(Dataset):
    """Images whose class is the quadrant holding a bright square."""

    def __len__(self):
        return 128

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        label = index % 4
        image = torch.rand(3, 32, 32, generator=generator) * 0.1
        row, col = divmod(label, 2)
        image[:, row * 16 + 4:row * 16 + 12, col * 16 + 4:col * 16 + 12] += 1.0
        return image, label


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.adaptive_avg_pool2d(F.relu(self.conv2(x)), 1)
        return self.head(torch.flatten(x, 1))


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(Shapes(), batch_size=16, shuffle=True, num_workers=2,
                        pin_memory=device.type == "cuda")
    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for step, (images, labels) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step % 4 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
