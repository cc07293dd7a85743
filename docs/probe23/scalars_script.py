"""A CUDA script whose forward mixes Python numbers and CPU tensors with device tensors the ways torch takes on CUDA
(KIND=one case; KIND=all: each case in try/except, printing ok/ERR). `dml` arg: realdml. Plain: CPU."""
import os, sys, torch
from torch import nn
import torch.nn.functional as F
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
KIND = os.environ.get("KIND", "all")
torch.manual_seed(0)
lin = nn.Linear(8, 8).to(dev)
CASES = {
    "mul2": lambda x: x * 2, "rsub": lambda x: 2 - x, "div3": lambda x: x / 3, "pow2": lambda x: x ** 2,
    "where0": lambda x: torch.where(x > 0, x, 0.0),
    "masked_inf": lambda x: x.masked_fill(x > 0.5, float("-inf")).softmax(-1),
    "clamp": lambda x: torch.clamp(x, 0, 1), "full_like": lambda x: x + torch.full_like(x, 3.0),
    "new_tensor": lambda x: x * x.new_tensor([2.0] * 8),
    "tensor0d": lambda x: x * torch.tensor(3.0), "tensor0d_add": lambda x: x + torch.tensor(3.0),
    "tensor0d_div": lambda x: x / torch.tensor(3.0), "tensor0d_sub": lambda x: torch.tensor(1.0) - x,
    "index_fill": lambda x: x.clone().index_fill_(0, torch.tensor([0]), 0),
    "bool_mask": lambda x: x[torch.tensor([True, False, True, False])],
    "long_idx": lambda x: x[torch.tensor([0, 2])],
    "setitem": lambda x: _setitem(x),
    "one_hot": lambda x: x + F.one_hot(torch.tensor([1, 2, 3, 0]).to(dev), 8).float(),
    "pad": lambda x: F.pad(x, (1, 1), value=0.5),
    "interp": lambda x: F.interpolate(x.view(1, 4, 8), scale_factor=2.0, mode="linear"),
    "lerp": lambda x: torch.lerp(x, x * 0, 0.5),
    "bce_pos": lambda x: F.binary_cross_entropy_with_logits(x, torch.ones(4, 8, device=dev), pos_weight=torch.ones(8, device=dev)),
    "ce_weight": lambda x: F.cross_entropy(x, torch.tensor([1, 2, 3, 0]).to(dev), weight=torch.ones(8, device=dev)),
    "ce_ls": lambda x: F.cross_entropy(x, torch.tensor([1, 2, 3, 0]).to(dev), label_smoothing=0.1),
    "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5),
    "maximum0d": lambda x: torch.maximum(x, torch.tensor(0.0)),
    "mse": lambda x: F.mse_loss(x, torch.zeros_like(x)),
    "scalar_tensor_item": lambda x: x * torch.tensor(2.0).item(),
    "arange_cpu_mul": lambda x: x * torch.arange(8).float(),
}
def _setitem(x):
    y = x.clone(); y[torch.tensor([0, 2])] = 1.0; return y
names = list(CASES) if KIND == "all" else [KIND]
for name in names:
    try:
        x = lin(torch.randn(4, 8).to(dev))
        out = CASES[name](x)
        loss = out.float().sum() if out.dim() else out
        loss.backward()
        print("ok", name, f"{loss.item():.5f}", flush=True)
    except Exception as e:
        print("ERR", name, type(e).__name__, str(e).splitlines()[0][:150], flush=True)
        if KIND != "all": raise
