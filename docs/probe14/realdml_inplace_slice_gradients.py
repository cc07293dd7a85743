"""realdml (source ~/.cache/realdml/env.sh; torch 2.4.1 venv python): CPU vs DirectML gradients of in-place ops on an offset slice (re-probe 14, case 20); the gather lines end in E_INVALIDARG (case 22)"""
import torch, torch_directml, torch.nn.functional as F
dml = torch_directml.device()
def run(body, dev):
    x = torch.arange(1., 9., device=dev).requires_grad_()
    z = (x * 1).view(2, 4)
    body(z, dev)
    (z * torch.arange(8., device=dev).view(2, 4)).sum().backward()
    return [round(v, 3) for v in x.grad.cpu().tolist()]
cases = {
 "leaky_relu_": lambda z, d: F.leaky_relu_(z[:, 2:], 0.1),
 "hardtanh_(ReLU6 inplace)": lambda z, d: F.hardtanh_(z[:, 2:], 0., 6.),
 "silu inplace": lambda z, d: F.silu(z[:, 2:], inplace=True),
 "elu_": lambda z, d: F.elu_(z[:, 2:]),
 "sqrt_": lambda z, d: z[:, 2:].sqrt_(),
 "abs_": lambda z, d: z[:, 2:].abs_(),
 "index_add_": lambda z, d: z[1:].index_add_(1, torch.tensor([0, 1], device=d), torch.ones(1, 2, device=d)),
 "masked_scatter_": lambda z, d: z[:, 2:].masked_scatter_(torch.tensor([[True, False], [False, True]], device=d), torch.zeros(4, device=d)),
 "index_copy_": lambda z, d: z[1:].index_copy_(1, torch.tensor([0], device=d), torch.zeros(1, 1, device=d)),
 "square_": lambda z, d: z[:, 2:].square_(),
 "threshold_": lambda z, d: F.threshold_(z[:, 2:], 3., 0.),
 "mul_ (control, listed)": lambda z, d: z[:, 2:].mul_(3),
}
for name, body in cases.items():
    try:
        c = run(body, "cpu"); g = run(body, dml)
        print(f"{name:28s} cpu {c} dml {g} {'SAME' if c == g else 'DIFF'}")
    except Exception as e:
        print(name, "ERR", type(e).__name__, str(e)[:100])
# gather with repeated index (its backward is scatter_add with repeated targets)
for dev in ("cpu", dml):
    w = torch.arange(1., 5., device=dev).requires_grad_()
    idx = torch.tensor([0, 0, 1, 3, 3, 3], device=dev)
    torch.gather(w, 0, idx).sum().backward()
    print("gather grad", dev, w.grad.cpu().tolist())
    w2 = torch.arange(1., 5., device=dev).requires_grad_()
    w2[idx].sum().backward(); print("index grad", dev, w2.grad.cpu().tolist())
    w3 = torch.arange(1., 5., device=dev).requires_grad_()
    torch.take_along_dim(w3, idx).sum().backward(); print("take_along_dim grad", dev, w3.grad.cpu().tolist())
