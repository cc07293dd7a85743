"""transformers DETR trained with labels: its Hungarian matcher and its box losses.

A tiny ResNet backbone of transformers' own (no timm, no download), random
weights. Labels are what DETR's image processors give: per image a dict of
``class_labels`` and normalised ``(cx, cy, w, h)`` ``boxes``; the model's loss
matches predictions to targets (scipy's ``linear_sum_assignment`` on the host)
and checks its boxes (``generalized_box_iou`` raises on degenerate ones).
"""
import torch
from transformers import DetrConfig, DetrForObjectDetection, ResNetConfig

BATCH_SIZE = 2
IMAGE = 64
BOXES = 3
CLASSES = 5


class Detector(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixels, boxes, classes):
        labels = [{"class_labels": c, "boxes": b} for b, c in zip(boxes, classes)]
        return self.model(pixel_values=pixels, labels=labels).loss


def build_model():
    torch.manual_seed(0)
    backbone = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
                            out_features=["stage2"])
    config = DetrConfig(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
                        num_labels=CLASSES, num_queries=8, d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, auxiliary_loss=False)
    return Detector(DetrForObjectDetection(config))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    pixels = torch.randn(batch_size, 3, IMAGE, IMAGE, generator=generator)
    centres = 0.25 + 0.5 * torch.rand(batch_size, BOXES, 2, generator=generator)
    sizes = 0.1 + 0.3 * torch.rand(batch_size, BOXES, 2, generator=generator)
    boxes = torch.cat([centres, sizes], dim=-1)
    classes = torch.randint(0, CLASSES, (batch_size, BOXES), generator=generator)
    return (pixels, boxes, classes), classes


def loss_fn(output, target):
    """The model already computed its loss."""
    return output


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=1e-4)
