"""Recommender with a sparse embedding gradient (nn.Embedding(sparse=True)), SGD."""
import torch
from torch import nn
BATCH_SIZE = 8
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.e = nn.Embedding(1000, 16, sparse=True); self.h = nn.Linear(16, 2)
    def forward(self, ids):
        return self.h(self.e(ids).mean(1))
def build_model():
    torch.manual_seed(0); return Net()
def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 1000, (batch_size, 5), generator=g), torch.randint(0, 2, (batch_size,), generator=g)
def make_optimizer(params):
    return torch.optim.SGD(params, lr=0.1)
