"""GPT-2 (transformers), 2 layers, causal LM loss from the model itself; AdamW.

Built from a config (random weights, no download). ``use_cache`` stays at its
default (True), as in users' training code: the model builds a ``DynamicCache``
in forward.
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from _hf import HFLoss, loss_fn  # noqa: F401  (loss_fn is the contract's)

BATCH_SIZE = 2
SEQ_LEN = 16
VOCAB = 128


def build_model():
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=64)
    return HFLoss(GPT2LMHeadModel(config), ("input_ids", "labels"))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (batch_size, SEQ_LEN), generator=generator)
    return (ids, ids.clone()), ids


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)
