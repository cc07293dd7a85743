"""A CUDA script reading its memory figures (nanoGPT/HF Trainer style) and native_dropout's mask."""
import torch
from torch import nn
dev = "cuda" if torch.cuda.is_available() else "cpu"
cuda = dev == "cuda"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.Dropout(0.5), nn.Linear(512, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(128, 256, device=dev); y = torch.randint(0, 10, (128,), device=dev)
out, mask = torch.ops.aten.native_dropout(torch.ones(4, 4, device=dev, dtype=torch.float16), 0.5, True)
print("mask", mask.dtype, out.dtype, mask.shape)
print("mask*2 dtype", (mask * 2).dtype, "masked", out.masked_fill(~mask.bool(), 0).shape)
for step in range(4):
    if cuda: torch.cuda.reset_peak_memory_stats()
    a0 = torch.cuda.memory_allocated() if cuda else 0
    big = torch.empty(1024, 1024, device=dev)                   # 4 MiB, freed below
    a1 = torch.cuda.memory_allocated() if cuda else 0
    del big
    a2 = torch.cuda.memory_allocated() if cuda else 0
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    peak = torch.cuda.max_memory_allocated() if cuda else 0
    st = torch.cuda.memory_stats() if cuda else {}
    print(step, f"{loss.item():.6f}", "alloc", a0, a1 - a0, a2 - a0, "peak>=4MiB", peak - a0 >= 4 << 20,
          "stats", st.get("allocated_bytes.all.current"), "reserved>=alloc", (torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()) if cuda else None, flush=True)
