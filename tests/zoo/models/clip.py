"""CLIP (transformers): text and vision towers, 2 layers each, contrastive loss; AdamW."""
import torch
from transformers import CLIPConfig, CLIPModel

from _hf import HFLoss, loss_fn  # noqa: F401

BATCH_SIZE = 2
SEQ_LEN = 12
IMAGE = 32
VOCAB = 128


class CLIPLoss(HFLoss):
    def forward(self, input_ids, pixel_values):
        return self.model(input_ids=input_ids, pixel_values=pixel_values, return_loss=True).loss


def build_model():
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                         vocab_size=VOCAB, max_position_embeddings=32, eos_token_id=2),
        vision_config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                           image_size=IMAGE, patch_size=8),
        projection_dim=32,
    )
    return CLIPLoss(CLIPModel(config), ())


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (batch_size, SEQ_LEN), generator=generator)
    ids[:, -1] = 2                                          # end of text
    pixels = torch.randn(batch_size, 3, IMAGE, IMAGE, generator=generator)
    return (ids, pixels), ids


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-4)
