"""nn.RReLU in training inside a model (its noise is lost by torch-directml's fallback on torch 2.4.1)."""
import sys, torch
from torch import nn
BATCH_SIZE = 8
def build_model(): torch.manual_seed(0); return nn.Sequential(nn.Linear(4, 8), nn.RReLU(0.1, 0.3), nn.Linear(8, 3))
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 4), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
