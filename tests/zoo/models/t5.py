"""T5 (transformers) encoder-decoder, 2 + 2 layers, relative position buckets, seq2seq loss; Adam."""
import torch
from transformers import T5Config, T5ForConditionalGeneration

from _hf import HFLoss, loss_fn  # noqa: F401

BATCH_SIZE = 2
SRC_LEN, TGT_LEN = 16, 8
VOCAB = 128


def build_model():
    torch.manual_seed(0)
    config = T5Config(d_model=64, d_ff=128, d_kv=16, num_layers=2, num_decoder_layers=2, num_heads=4,
                      vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0)
    return HFLoss(T5ForConditionalGeneration(config), ("input_ids", "labels"))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    source = torch.randint(1, VOCAB, (batch_size, SRC_LEN), generator=generator)
    labels = torch.randint(1, VOCAB, (batch_size, TGT_LEN), generator=generator)
    return (source, labels), labels


def make_optimizer(params):
    return torch.optim.Adam(params, lr=1e-3)
