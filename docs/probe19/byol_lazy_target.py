"""BYOL as lucidrains' byol-pytorch writes it: the target encoder is made lazily, on the forward's first call, by
copy.deepcopy of the online encoder (a CNN with BatchNorm buffers), then updated by EMA."""
import copy, torch
from torch import nn
import torch.nn.functional as F
BATCH_SIZE = 8
def encoder():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 16))
class BYOL(nn.Module):
    def __init__(self):
        super().__init__(); self.online = encoder(); self.predictor = nn.Linear(16, 16); self.target = None
    def _get_target_encoder(self):
        if self.target is None:
            self.target = copy.deepcopy(self.online)
            for p in self.target.parameters(): p.requires_grad_(False)
        return self.target
    def forward(self, x):
        v1, v2 = x, torch.flip(x, dims=(3,))
        p1, p2 = self.predictor(self.online(v1)), self.predictor(self.online(v2))
        with torch.no_grad():
            t = self._get_target_encoder()
            z1, z2 = t(v1), t(v2)
            for po, pt in zip(self.online.parameters(), t.parameters()):
                pt.mul_(0.99).add_(po.detach(), alpha=0.01)
        loss = (2 - 2 * F.cosine_similarity(p1, z2.detach(), dim=-1)) + (2 - 2 * F.cosine_similarity(p2, z1.detach(), dim=-1))
        return loss.mean()
def build_model(): torch.manual_seed(0); return BYOL()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 3, 16, 16, generator=g), torch.zeros(n)
def loss_fn(out, y): return out
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
