"""Knowledge distillation: a frozen torchvision ViT teacher (eval, no_grad) and a small CNN student."""
import torch
from torch import nn
import torch.nn.functional as F
BATCH_SIZE = 2
class Distill(nn.Module):
    def __init__(self):
        super().__init__()
        import torchvision
        self.teacher = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                            hidden_dim=32, mlp_dim=64, num_classes=10)
        self.teacher.requires_grad_(False)
        self.student = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    def forward(self, x):
        self.teacher.eval()
        with torch.no_grad():
            t = self.teacher(x)
        s = self.student(x)
        return s + 0.0 * t, t
def loss_fn(out, target):
    s, t = out
    return F.cross_entropy(s, target) + F.kl_div(F.log_softmax(s, -1), F.softmax(t, -1), reduction="batchmean")
def build_model():
    torch.manual_seed(0); return Distill()
def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 3, 32, 32, generator=g), torch.randint(0, 10, (batch_size,), generator=g)
