"""Frozen nn.TransformerEncoder with default enable_nested_tensor=True and a padding mask, eval + no_grad; a trained head."""
import torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.text = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2)
        self.text.requires_grad_(False); self.emb.requires_grad_(False)
        self.head = nn.Linear(32, 4)
    def forward(self, tokens):
        pad = tokens == 0
        self.text.eval()
        with torch.no_grad():
            h = self.text(self.emb(tokens), src_key_padding_mask=pad)
        h = h.masked_fill(pad[..., None], 0.0)
        return self.head(h.sum(1) / (~pad).sum(1, keepdim=True))
def build_model():
    torch.manual_seed(0); return Net()
def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    t = torch.randint(1, 100, (batch_size, 12), generator=g)
    t[0, 7:] = 0; t[1, 4:] = 0
    return t, torch.randint(0, 4, (batch_size,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
