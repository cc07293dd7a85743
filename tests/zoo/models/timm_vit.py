"""timm ViT-Tiny/16 (random weights) at 64x64: fused attention (F.scaled_dot_product_attention), LayerNorm, GELU; AdamW."""
import timm
import torch

BATCH_SIZE = 2
IMAGE = 64


def build_model():
    torch.manual_seed(0)
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=IMAGE, num_classes=10)


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 3, IMAGE, IMAGE, generator=generator)
    return images, torch.randint(0, 10, (batch_size,), generator=generator)


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05)
