"""Shared by the transformers entries: a training step whose loss is the model's own.

Hugging Face models compute their loss inside ``forward`` when given labels
(``outputs.loss``), which is how users train them; the wrapper passes the
contract's tensors as keyword arguments and returns that loss.
"""
from torch import nn


class HFLoss(nn.Module):
    """``model(**dict(zip(names, tensors))).loss``."""

    def __init__(self, model: nn.Module, names):
        super().__init__()
        self.model = model
        self.names = tuple(names)

    def forward(self, *tensors):
        return self.model(**dict(zip(self.names, tensors))).loss


def loss_fn(output, target):
    """The model already computed its loss."""
    return output
