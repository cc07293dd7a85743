"""Prints what model code sees of the device under --target."""
import torch, sys
from torch import nn
BATCH_SIZE = 4
def _try(name, f):
    try: r = f(); print("PROBE", name, "->", r, file=sys.stderr)
    except Exception as e: print("PROBE", name, "RAISES", type(e).__name__, str(e)[:100], file=sys.stderr)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(8, 4); self.done = False
    def forward(self, x):
        if not self.done:
            self.done = True
            import torch.utils.checkpoint as c
            _try("device", lambda: x.device)
            _try("is_mps", lambda: x.is_mps)
            _try("is_xpu", lambda: x.is_xpu)
            _try("infer", lambda: c._infer_device_type(x))
            _try("get_device_states", lambda: c.get_device_states(x))
            _try("str", lambda: str(x.device))
            _try("zeros", lambda: torch.zeros(2, device=x.device).device)
            _try("zeros str", lambda: torch.zeros(2, device=str(x.device)).device)
            _try("tensor list", lambda: torch.tensor([1, 2], device=x.device).device)
            _try("arange", lambda: torch.arange(3, device=x.device.type).device)
            _try("new_zeros", lambda: x.new_zeros(2).device)
            _try("to(dev, float16)", lambda: x.to(x.device, torch.float16).dtype)
            _try("to(device=)", lambda: torch.ones(2).to(device=x.device, non_blocking=True).device)
            _try("with torch.device", lambda: (lambda d: (d.__enter__(), torch.ones(2).device, d.__exit__(None,None,None))[1])(torch.device(x.device)))
            _try("Generator", lambda: torch.Generator(device=x.device))
            _try("randn gen cpu", lambda: torch.randn(2, generator=torch.Generator().manual_seed(0)).to(x.device).device)
            _try("get_device", lambda: x.get_device())
            _try("deepcopy", lambda: __import__("copy").deepcopy(self.l).weight.device)
            _try("module.to", lambda: nn.Linear(2, 2).to(x.device).weight.device)
            _try("empty_like", lambda: torch.empty_like(x, device=x.device).device)
            _try("as_tensor np", lambda: torch.as_tensor(__import__("numpy").ones(2), device=x.device).device)
            _try("from_numpy.to", lambda: torch.from_numpy(__import__("numpy").ones(2, dtype="float32")).to(x.device).device)
            _try("full", lambda: torch.full((2,), 1.0, device=x.device).device)
            _try("device eq", lambda: x.device == torch.device(x.device.type, 0))
            _try("autocast enabled", lambda: (lambda a: (a.__enter__(), torch.mm(x, x.t()).dtype, a.__exit__(None,None,None))[1])(torch.autocast(x.device.type, dtype=torch.float16)))
            _try("is_autocast_available", lambda: torch.amp.is_autocast_available(x.device.type))
            _try("pin/cpu", lambda: x.cpu().device)
            _try("save/load", lambda: (lambda b: (torch.save(x, b), b.seek(0), torch.load(b, map_location=x.device).device)[2])(__import__("io").BytesIO()))
            _try("save/load nomap", lambda: (lambda b: (torch.save(x, b), b.seek(0), torch.load(b).device)[2])(__import__("io").BytesIO()))
            _try("set_default_device", lambda: (torch.set_default_device(x.device), torch.ones(1).device, torch.set_default_device(None))[1])
            _try("untyped_storage.device", lambda: x.untyped_storage().device)
            _try("accelerator", lambda: torch.accelerator.current_accelerator())
            _try("dlpack", lambda: x.__dlpack_device__())
            _try("numpy", lambda: x.detach().cpu().numpy().shape)
            _try("sync", lambda: getattr(torch, x.device.type).synchronize())
            _try("pickle deepcopy tensor", lambda: __import__("copy").deepcopy(x).device)
        return self.l(x)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randn(n, 8), torch.randint(0, 4, (n,))
