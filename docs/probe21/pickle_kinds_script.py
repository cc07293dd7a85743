"""A CUDA script pickling device tensors of several kinds (a Parameter, a tensor requiring grad, a view, float16,
int64, a non-contiguous transpose) and reading back type, requires_grad, dtype, shape, strides, values, and a
Parameter re-assigned to a module; `dml` arg: realdml."""
import io, sys, torch
from torch import nn
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
lin = nn.Linear(3, 4).to(dev)
base = torch.arange(12.0, device=dev).view(3, 4)
objs = {"param": lin.weight, "grad_leaf": torch.ones(2, device=dev, requires_grad=True), "view": base[1:, 1:],
        "half": base.half(), "long": torch.arange(5, device=dev), "transposed": base.t()}
import os
if os.environ.get("GRAD", "1") == "0": objs.pop("grad_leaf")  # GRAD=0: leave out the tensor requiring grad
buf = io.BytesIO(); torch.save(objs, buf); buf.seek(0)
back = torch.load(buf, map_location=dev, weights_only=False)
for k, v in back.items():
    print(k, type(v).__name__, v.requires_grad, v.dtype, tuple(v.shape), v.stride(), v.is_contiguous(), f"{float(v.float().sum()):.3f}", str(v.device).split(":")[0], flush=True)
lin.weight = back["param"]; print("assigned", type(lin.weight).__name__)
