"""A GPT-2-small-shaped language model (12 layers, width 768, 12 heads, 50257 tokens, tied embeddings),
written from scratch for benchmarks/confirm_cost.py: about 124 M parameters, random weights, random tokens,
AdamW. It lives here, not in models/, because every file in models/ is scanned, verified and emulated by the
integration tests, and a step of this size would cost CI minutes there."""
import torch
from torch import nn
from torch.nn import functional as F

BATCH_SIZE = 2
SEQ_LEN = 128
VOCAB = 50257
WIDTH, HEADS, LAYERS, CONTEXT = 768, 12, 12, 1024


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.out = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        batch, tokens, _ = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(WIDTH, dim=2)
        q, k, v = (t.view(batch, tokens, HEADS, WIDTH // HEADS).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, tokens, WIDTH))
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT2Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # the output layer is the token embedding (tied)


def build_model():
    torch.manual_seed(0)
    return GPT2Small()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (batch_size, SEQ_LEN + 1), generator=generator)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=3e-4)
