"""A mixture-of-experts language model: top-2 routing, tokens per expert read with ``.tolist()``.

The layer is written the way many MoE implementations are (Mixtral-style
routers, DeepSeek/Megablocks-style dispatch): the tokens are sorted by the
expert they go to, the count per expert is read back to the host with
``bincount(...).tolist()``, each expert runs on its own slice
(``split(counts)``), experts that received no token are skipped, and the
weighted outputs are added back per token with ``index_add_``. Which experts
run, and on how many tokens, depends on the router's values.
"""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 4
SEQ_LEN = 12
VOCAB = 64
DIM = 32
EXPERTS = 6
TOP_K = 2


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, 2 * DIM)
        self.down = nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class MoELayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(DIM, EXPERTS, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(EXPERTS))

    def forward(self, x):
        tokens = x.reshape(-1, DIM)
        weights, chosen = self.router(tokens).softmax(dim=-1).topk(TOP_K, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        flat = chosen.flatten()
        order = flat.argsort()
        counts = torch.bincount(flat, minlength=EXPERTS).tolist()
        token_of = order // TOP_K
        routed = tokens[token_of]
        outputs = []
        for expert, chunk in zip(self.experts, routed.split(counts)):
            if chunk.shape[0] == 0:
                continue
            outputs.append(expert(chunk))
        mixed = torch.cat(outputs) * weights.flatten()[order].unsqueeze(-1)
        out = torch.zeros_like(tokens).index_add_(0, token_of, mixed)
        return out.reshape(x.shape)


class MoELM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(MoELayer() for _ in range(2))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = x + layer(x)
        return self.head(self.norm(x))


def build_model():
    torch.manual_seed(0)
    return MoELM()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (batch_size, SEQ_LEN + 1), generator=generator)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)
