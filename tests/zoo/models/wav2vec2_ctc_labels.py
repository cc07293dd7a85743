"""wav2vec2 (transformers) trained with its own CTC loss: ``model(input_values, labels=labels).loss``.

Labels are padded with -100 as the data collators pad them; the model's loss
masks them (``labels >= 0``), flattens the targets with ``masked_select`` and
sums the target lengths from the mask, all on the device. Layerdrop 0 (a
random layer skip would make two runs differ).
"""
import numpy as np
import torch
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

from _hf import HFLoss, loss_fn  # noqa: F401

BATCH_SIZE = 2
SAMPLES = 1600                  # 0.1 s of 16 kHz audio
VOCAB = 16
TARGET_LEN = 6


def build_model():
    torch.manual_seed(0)
    np.random.seed(0)           # SpecAugment's time masks are drawn with numpy
    config = Wav2Vec2Config(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, layerdrop=0.0, pad_token_id=0,
        ctc_loss_reduction="mean",
    )
    return HFLoss(Wav2Vec2ForCTC(config), ("input_values", "labels"))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    audio = torch.randn(batch_size, SAMPLES, generator=generator)
    labels = torch.randint(1, VOCAB, (batch_size, TARGET_LEN), generator=generator)
    for row in range(batch_size):
        labels[row, TARGET_LEN - 1 - row % TARGET_LEN:] = -100   # padded as a data collator pads
    return (audio, labels), labels


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-4)
