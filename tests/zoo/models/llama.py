"""Llama (transformers), 2 layers, grouped-query attention (SDPA), RMSNorm, rotary embeddings, SwiGLU; AdamW."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from _hf import HFLoss, loss_fn  # noqa: F401

BATCH_SIZE = 2
SEQ_LEN = 16
VOCAB = 128


def build_model():
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64)
    return HFLoss(LlamaForCausalLM(config), ("input_ids", "labels"))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (batch_size, SEQ_LEN), generator=generator)
    return (ids, ids.clone()), ids


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)
