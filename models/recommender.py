"""A small two-tower-style click predictor built on ``nn.EmbeddingBag``.

Each example is a user, described by the bag of items they interacted with
(pooled with mode "mean"), and a candidate, described by its item id plus a
bag of tag ids (pooled with mode "sum"). Bags have different lengths, so they
are passed flat with offsets, the way EmbeddingBag wants them. An MLP over the
concatenated embeddings gives one logit; the loss is BCE-with-logits on float
0/1 click targets. Trained with Adagrad, the usual choice for sparse
embedding tables.
"""
import torch
from torch import nn
from torch.nn import functional as F

BATCH_SIZE = 256
ITEMS = 5000
TAGS = 500
DIM = 32
MAX_HISTORY = 20
MAX_TAGS = 5


class Recommender(nn.Module):
    def __init__(self, items: int = ITEMS, tags: int = TAGS, dim: int = DIM):
        super().__init__()
        self.history = nn.EmbeddingBag(items, dim, mode="mean")
        self.item = nn.Embedding(items, dim)
        self.tags = nn.EmbeddingBag(tags, dim, mode="sum")
        self.mlp = nn.Sequential(
            nn.Linear(3 * dim, 128), nn.ReLU(),
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, 1),
        )

    def forward(self, history_ids, history_offsets, item_ids, tag_ids, tag_offsets):
        user = self.history(history_ids, history_offsets)
        item = self.item(item_ids)
        tags = self.tags(tag_ids, tag_offsets)
        return self.mlp(torch.cat([user, item, tags], dim=1)).squeeze(1)


def _bags(batch_size, vocabulary, max_length, generator):
    """Flat ids and start offsets for ``batch_size`` bags of 1..max_length ids."""
    lengths = torch.randint(1, max_length + 1, (batch_size,), generator=generator)
    ids = torch.randint(0, vocabulary, (int(lengths.sum()),), generator=generator)
    offsets = torch.cumsum(lengths, 0) - lengths
    return ids, offsets


def build_model():
    torch.manual_seed(0)
    return Recommender()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    history_ids, history_offsets = _bags(batch_size, ITEMS, MAX_HISTORY, generator)
    item_ids = torch.randint(0, ITEMS, (batch_size,), generator=generator)
    tag_ids, tag_offsets = _bags(batch_size, TAGS, MAX_TAGS, generator)
    clicks = torch.randint(0, 2, (batch_size,), generator=generator).float()
    return (history_ids, history_offsets, item_ids, tag_ids, tag_offsets), clicks


def loss_fn(output, target):
    return F.binary_cross_entropy_with_logits(output, target)


def make_optimizer(params):
    return torch.optim.Adagrad(params, lr=0.05)
