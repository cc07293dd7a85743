"""A CUDA script drawing its noise from a generator on the device (`torch.Generator(device=dev)`, as diffusers'
pipelines and seeded-augmentation code do). `dml` arg: realdml."""
import sys, torch
from torch import nn
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
model = nn.Linear(8, 3).to(dev); opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator(device=dev).manual_seed(1)
x = torch.randn(4, 8).to(dev); y = torch.randint(0, 3, (4,)).to(dev)
for i in range(3):
    noisy = x + 0.1 * torch.randn(x.shape, device=dev, generator=g)
    loss = nn.functional.cross_entropy(model(noisy), y); opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}", flush=True)
