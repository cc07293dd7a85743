"""Text-conditioned regressor: a frozen pretrained text encoder (nn.TransformerEncoder, eval, no grad), a trained head."""
import torch
from torch import nn

BATCH_SIZE = 8

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.text = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        for p in list(self.text.parameters()) + list(self.emb.parameters()):
            p.requires_grad_(False)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        for p in self.attn.parameters():
            p.requires_grad_(False)
        self.head = nn.Linear(32, 4)

    def forward(self, tokens):
        self.text.eval(); self.attn.eval()
        with torch.no_grad():
            h = self.text(self.emb(tokens))
            h, _ = self.attn(h, h, h, need_weights=False)
        return self.head(h.mean(1))

def build_model():
    torch.manual_seed(0)
    return Net()

def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 100, (batch_size, 12), generator=g), torch.randint(0, 4, (batch_size,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
