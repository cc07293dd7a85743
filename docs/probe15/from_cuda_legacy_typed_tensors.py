"""Re-probe 15: `--from cuda` and the legacy typed tensors of older CUDA scripts (`torch.cuda.FloatTensor`).

The idiom of eriklindernoren/PyTorch-GAN (every model there) and many older repositories:
`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, then `Tensor(n, 1).fill_(1.0)` and
`imgs.type(Tensor)`.

    PYTHONPATH=. python -m dmlprof scan docs/probe15/from_cuda_legacy_typed_tensors.py --device emulated-dml --from cuda

exit 4, "the script asks for CUDA, which does not work on this machine (at ...:11) (scan it with --from cuda: ...)":
the advice is to pass the flag already passed (also `--device cpu --from cuda`); the main fix (3208ba1) names an
unmapped torch.cuda name instead, but `torch.cuda.FloatTensor(...)` fails in torch's C type check ("type
torch.cuda.FloatTensor not available. Torch not compiled with CUDA enabled"), not inside torch.cuda's Python.
`x.type(torch.cuda.FloatTensor)` fails too ("Cannot initialize CUDA without ATen_cuda library"); docs/scripts.md
lists neither as mapped nor as unmapped. Plainly on a CUDA machine: 3 losses; on this one (no CUDA) the CPU branch
runs: 3 losses, exit 0.
"""
import torch, torch.nn as nn
cuda = True if torch.cuda.is_available() else False
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
D = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
if cuda:
    D.cuda()
opt = torch.optim.Adam(D.parameters(), lr=2e-4)
for step in range(3):
    imgs = torch.randn(5, 4)
    valid = Tensor(imgs.size(0), 1).fill_(1.0)
    real = imgs.type(Tensor)
    loss = nn.BCELoss()(D(real), valid)
    opt.zero_grad(); loss.backward(); opt.step()
    print("step", step, round(loss.item(), 4))
