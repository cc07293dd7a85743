"""torchvision Faster R-CNN (ResNet-50 FPN, random weights) in train mode: its own RPN and box-head losses.

The detector wants a list of images and a list of target dicts; the wrapper
builds them from batched tensors and sums the loss dict, as a training loop
does. Images are resized to 128 pixels (min_size/max_size) to stay small.
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
        self.model = torchvision.models.detection.fasterrcnn_resnet50_fpn(
            weights=None, weights_backbone=None, num_classes=CLASSES, min_size=IMAGE, max_size=IMAGE)

    def forward(self, images, boxes, labels):
        targets = [{"boxes": b, "labels": l} for b, l in zip(boxes, labels)]
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
    return (images, boxes, labels), labels


def loss_fn(output, target):
    """The detector already summed its losses."""
    return output
