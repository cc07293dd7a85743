"""torchvision Mask R-CNN (ResNet-50 FPN, random weights) in train mode: box, class and mask losses.

As the Faster R-CNN entry, plus instance masks: per image a target dict of
``boxes``, ``labels`` and ``masks`` (one binary mask per box), as torchvision's
detection reference scripts give. Images are resized to 128 pixels.
"""
import torch
import torchvision

BATCH_SIZE = 2
IMAGE = 128
BOXES = 3
CLASSES = 4


class Detector(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torchvision.models.detection.maskrcnn_resnet50_fpn(
            weights=None, weights_backbone=None, num_classes=CLASSES, min_size=IMAGE, max_size=IMAGE)

    def forward(self, images, boxes, labels, masks):
        targets = [{"boxes": b, "labels": l, "masks": m} for b, l, m in zip(boxes, labels, masks)]
        losses = self.model(list(images), targets)
        return sum(losses.values())


def build_model():
    torch.manual_seed(0)
    return Detector()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    images = torch.rand(batch_size, 3, IMAGE, IMAGE, generator=generator)
    corners = torch.rand(batch_size, BOXES, 2, generator=generator) * (IMAGE / 2)
    sizes = 16 + torch.rand(batch_size, BOXES, 2, generator=generator) * (IMAGE / 2 - 16)
    boxes = torch.cat([corners, corners + sizes], dim=-1)
    labels = torch.randint(1, CLASSES, (batch_size, BOXES), generator=generator)
    rows = torch.arange(IMAGE).view(1, 1, IMAGE, 1)
    cols = torch.arange(IMAGE).view(1, 1, 1, IMAGE)
    masks = ((rows >= boxes[..., 1, None, None]) & (rows < boxes[..., 3, None, None])
             & (cols >= boxes[..., 0, None, None]) & (cols < boxes[..., 2, None, None])).to(torch.uint8)
    return (images, boxes, labels, masks), labels


def loss_fn(output, target):
    """The detector already summed its losses."""
    return output
