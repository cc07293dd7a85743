"""Re-probe 16: `check --target dml` fails masked mean pooling (float / int64 count, one operand broadcast) as
"known wrong results", which real torch-directml computes right.

    python -m dmlprof check docs/probe16/wrong_class_one_sided_integer_broadcast.py --target dml

Expected: passes (nothing falls back, no wrong result). Got: exit 6, "calls with known wrong results 2
(limit 0): the result is wrong wherever an operand is broadcast" at the pooling line (`h.sum(1) /
mask.sum(1, keepdim=True)`: div.Tensor float32 (4, 16) by int64 (4, 1)); and the same for `h * mask[..., None]`
(mul.Tensor, float32 by int64). The class was measured on (5, 1) with (5,), where both operands broadcast; with
one operand broadcast the results are the CPU's. Run this file plainly under realdml to see both:

    . ~/.cache/realdml/env.sh; <torch 2.4.1 python> docs/probe16/wrong_class_one_sided_integer_broadcast.py

measured 2026-12-07: div float(4,16)/int64(4,1) 0 of 64 wrong, mul float(4,16)*int64(4,1) 0 of 64,
remainder int64(4,16)%int64(4,1) 0 of 64; div float(5,1)/int64(5,) 18 of 25, mul 18 of 25. `scan --target dml
--confirm` of this file says so too ("contradicted div.Tensor ... predicted device, wrong; real device").
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 4


class MeanPoolClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16, padding_idx=0)
        self.fc = nn.Linear(16, 2)

    def forward(self, ids):
        mask = (ids != 0).long()                        # an attention mask, int64 as tokenizers give it
        h = self.emb(ids) * mask[..., None]             # mul.Tensor float32 (4, 10, 16) by int64 (4, 10, 1)
        pooled = h.sum(1) / mask.sum(1, keepdim=True)   # div.Tensor float32 (4, 16) by int64 (4, 1)
        return self.fc(pooled)


def build_model():
    torch.manual_seed(0)
    return MeanPoolClassifier()


def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (batch_size, 10), generator=g)
    ids[:, 7:] = 0
    return ids, torch.randint(0, 2, (batch_size,), generator=g)


if __name__ == "__main__":
    import torch_directml
    dev = torch_directml.device()

    def wrong(a, b, op):
        return int((~torch.isclose(op(a, b), op(a.to(dev), b.to(dev)).cpu(), rtol=1e-5, atol=1e-6)).sum())

    fa, ib = torch.randn(4, 16), torch.randint(1, 9, (4, 1))
    print("div float(4,16)/int64(4,1) wrong:", wrong(fa, ib, torch.div), "of 64")
    print("mul float(4,16)*int64(4,1) wrong:", wrong(fa, ib, torch.mul), "of 64")
    print("div float(5,1)/int64(5,) wrong:", wrong(torch.randn(5, 1), torch.randint(1, 9, (5,)), torch.div), "of 25")
