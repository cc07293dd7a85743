"""`F.pad(x, (1, 1), value=0.5)` of a device tensor, forward only then with backward; `dml` arg: realdml."""
import sys, torch
import torch.nn.functional as F
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
x = torch.arange(8.0).view(2, 4).to(dev)
for mode in ["c0", "c05"]:
    try:
        print(mode, F.pad(x, (1, 1), value=0.0 if mode == "c0" else 0.5).cpu().tolist(), flush=True)
    except Exception as e: print("ERR", mode, str(e)[:160], flush=True)
w = torch.ones(2, 4, requires_grad=True, device=dev)
y = F.pad(x * w, (1, 1), value=0.5); print("fwd ok", flush=True)
y.sum().backward(); print("bwd ok", w.grad.cpu().tolist())
