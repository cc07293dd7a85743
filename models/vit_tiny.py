"""ViT-Tiny (patch 16, width 192, depth 12, 3 heads, MLP 768) on 3x224x224 images, 1000 classes.

The standard Vision Transformer (Dosovitskiy et al., 2020) at its "Tiny" size
(Touvron et al., DeiT): a strided-convolution patch embedding, a class token,
learned position embeddings, twelve pre-norm encoder blocks (LayerNorm,
multi-head self-attention through ``torch.nn.functional.scaled_dot_product_attention``,
LayerNorm, GELU MLP) and a linear head on the class token. About 5.7 M
parameters, random weights, synthetic images; trained with AdamW as ViTs are.
"""
import torch
from torch import nn
from torch.nn import functional as F

BATCH_SIZE = 4
IMAGE_SIZE = 224
PATCH_SIZE = 16


class Attention(nn.Module):
    """Multi-head self-attention; the attention itself is one fused SDPA call."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(batch, tokens, dim))


class Block(nn.Module):
    """Pre-norm transformer encoder block."""

    def __init__(self, dim: int, heads: int, mlp_dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image_size=IMAGE_SIZE, patch_size=PATCH_SIZE, classes=1000, dim=192, depth=12, heads=3,
                 mlp_dim=768):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch_size, stride=patch_size)
        patches = (image_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, patches + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp_dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (batch, patches, dim)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def build_model():
    torch.manual_seed(0)
    return VisionTransformer()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(batch_size, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    labels = torch.randint(0, 1000, (batch_size,), generator=generator)
    return images, labels


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05)
