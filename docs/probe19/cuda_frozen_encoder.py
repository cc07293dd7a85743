"""A CUDA script: a frozen nn.TransformerEncoder (eval, no_grad) feeding a trained head."""
import torch
from torch import nn
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2, enable_nested_tensor=False).to(dev).eval()
for p in enc.parameters(): p.requires_grad_(False)
head = nn.Linear(32, 4).to(dev); opt = torch.optim.SGD(head.parameters(), lr=0.1)
x = torch.randn(8, 12, 32, device=dev); y = torch.randint(0, 4, (8,), device=dev)
for i in range(4):
    with torch.no_grad():
        h = enc(x).mean(1)
    loss = nn.functional.cross_entropy(head(h), y); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
