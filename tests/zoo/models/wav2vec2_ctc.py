"""wav2vec2 (transformers) with a CTC head, trained with F.ctc_loss as users write it.

Layerdrop 0 (a random layer skip would make two runs differ). The loss is the
user's own: ``F.ctc_loss`` with the input and target lengths as CPU tensors,
the documented (and for cuDNN, required) way, on the model's logits.
"""
import numpy as np
import torch
import torch.nn.functional as F
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

BATCH_SIZE = 2
SAMPLES = 1600                  # 0.1 s of 16 kHz audio
VOCAB = 16
TARGET_LEN = 5


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, audio):
        return self.model(input_values=audio).logits


def build_model():
    torch.manual_seed(0)
    np.random.seed(0)           # SpecAugment's time masks are drawn with numpy
    config = Wav2Vec2Config(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, layerdrop=0.0, pad_token_id=0,
    )
    return Logits(Wav2Vec2ForCTC(config))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    audio = torch.randn(batch_size, SAMPLES, generator=generator)
    targets = torch.randint(1, VOCAB, (batch_size, TARGET_LEN), generator=generator)
    return audio, targets


def loss_fn(logits, targets):
    log_probs = F.log_softmax(logits, dim=-1).transpose(0, 1)          # (time, batch, vocab)
    batch = targets.shape[0]
    input_lengths = torch.full((batch,), log_probs.shape[0], dtype=torch.long)   # CPU, as users write it
    target_lengths = torch.full((batch,), targets.shape[1], dtype=torch.long)
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=True)


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-4)
