"""BERT masked-LM (transformers), 2 layers, padding mask, loss on 15 % masked positions (-100 elsewhere); AdamW."""
import torch
from transformers import BertConfig, BertForMaskedLM

from _hf import HFLoss, loss_fn  # noqa: F401

BATCH_SIZE = 2
SEQ_LEN = 16
VOCAB = 128
MASK_ID = 3


def build_model():
    torch.manual_seed(0)
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        vocab_size=VOCAB, max_position_embeddings=64)
    return HFLoss(BertForMaskedLM(config), ("input_ids", "attention_mask", "labels"))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, VOCAB, (batch_size, SEQ_LEN), generator=generator)
    attention_mask = torch.ones_like(ids)
    attention_mask[0, SEQ_LEN - 4:] = 0                      # the first sequence is padded
    masked = torch.rand(batch_size, SEQ_LEN, generator=generator) < 0.15
    masked[:, 1] = True                                       # at least one position per row
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    inputs = torch.where(masked, torch.full_like(ids, MASK_ID), ids)
    return (inputs, attention_mask, labels), labels


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)
