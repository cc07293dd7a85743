import torch, torch.nn as nn, sys
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
m = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()) for _ in range(12)], nn.Linear(64, 4)).to(dev)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x = torch.randn(16, 64, device=dev); y = torch.randint(0, 4, (16,), device=dev)
for i in range(8):
    loss = nn.functional.cross_entropy(m(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(i, round(loss.item(), 6), flush=True)
print("done", flush=True)
