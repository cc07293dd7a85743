"""A spatial transformer network (Jaderberg et al.) on 1x28x28 digits: affine_grid + grid_sample, and their backward.

A localisation net predicts a 2x3 affine transform per image (initialised to
the identity), the input is resampled with ``F.grid_sample``, then classified.
"""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 4


class STN(nn.Module):
    def __init__(self):
        super().__init__()
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, 7), nn.MaxPool2d(2), nn.ReLU(True),
            nn.Conv2d(8, 10, 5), nn.MaxPool2d(2), nn.ReLU(True),
        )
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 6))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def stn(self, x):
        theta = self.fc_loc(self.localization(x).view(-1, 10 * 3 * 3)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(F.dropout2d(self.conv2(x), training=self.training), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        return F.log_softmax(self.fc2(F.dropout(x, training=self.training)), dim=1)


def build_model():
    torch.manual_seed(0)
    return STN()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 1, 28, 28, generator=generator), torch.randint(0, 10, (batch_size,), generator=generator)


def loss_fn(log_probs, target):
    return F.nll_loss(log_probs, target)
