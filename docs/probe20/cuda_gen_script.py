"""diffusers-style noise in a CUDA script: a generator made on the device (`torch.Generator(device=dev)`), noise drawn
with it on the device; `dml` on realdml."""
import sys, torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
w = torch.zeros(4, device=dev, requires_grad=True); opt = torch.optim.SGD([w], lr=0.1)
try:
    g = torch.Generator(device=dev).manual_seed(0); print("generator on", g.device)
except Exception as e:
    print("generator:", type(e).__name__, str(e)[:80]); g = torch.Generator().manual_seed(0)
for i in range(3):
    noise = torch.randn(4, generator=g, device=dev) if g.device.type != "cpu" or dev == "cpu" else torch.randn(4, generator=g).to(dev)
    loss = ((w - noise) ** 2).sum(); opt.zero_grad(); loss.backward(); opt.step(); print(i, f"{loss.item():.6f}")
