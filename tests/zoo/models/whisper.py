"""Whisper (transformers) speech-to-text, 2 + 2 layers on 16 mel bins, seq2seq loss; AdamW."""
import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

from _hf import HFLoss, loss_fn  # noqa: F401

BATCH_SIZE = 2
MEL_BINS = 16
SOURCE_POSITIONS = 32          # the encoder takes 2 * SOURCE_POSITIONS frames
TGT_LEN = 8
VOCAB = 128


def build_model():
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=MEL_BINS, d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
        max_source_positions=SOURCE_POSITIONS, max_target_positions=32,
        pad_token_id=1, bos_token_id=2, eos_token_id=2, decoder_start_token_id=2,
        suppress_tokens=None, begin_suppress_tokens=None,
    )
    return HFLoss(WhisperForConditionalGeneration(config), ("input_features", "labels"))


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(batch_size, MEL_BINS, 2 * SOURCE_POSITIONS, generator=generator)
    labels = torch.randint(3, VOCAB, (batch_size, TGT_LEN), generator=generator)
    return (features, labels), labels


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)
