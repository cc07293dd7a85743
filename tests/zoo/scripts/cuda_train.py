"""A CUDA training script, as written for an NVIDIA GPU: ``device = "cuda"``, ``.cuda()``, cudnn.benchmark.

A small causal Transformer language model (nn.TransformerEncoder) on random
tokens, 3,000 optimizer steps, AdamW, gradient clipping, timing with
``torch.cuda.synchronize()`` and the peak memory in each log line.
"""
import time

import torch
import torch.nn.functional as F
from torch import nn

assert torch.cuda.is_available(), "this script needs a CUDA GPU"
device = "cuda"
torch.backends.cudnn.benchmark = True
STEPS = 3000
VOCAB, SEQ, BATCH = 256, 32, 8


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, 64))
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        return self.out(self.encoder(self.embed(tokens) + self.pos, mask=mask, is_causal=True))


def main():
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    model = TinyLM().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.randint(0, VOCAB, (64, SEQ + 1))
    torch.cuda.synchronize()
    started = time.time()
    for step in range(STEPS):
        batch = data[torch.randint(0, 64, (BATCH,))].cuda(non_blocking=True)
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 100 == 0:
            torch.cuda.synchronize()
            print(f"step {step}: loss {loss.item():.4f}, {time.time() - started:.1f} s, "
                  f"peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
