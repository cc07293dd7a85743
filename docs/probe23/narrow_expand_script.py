"""A view with a storage offset of an expanded 0-d device tensor (what F.pad's backward does to sum()'s gradient);
KIND=narrow|slice|pad_mean|pad_ce|pad_sum; `dml` arg: realdml."""
import os, sys, torch
import torch.nn.functional as F
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
KIND = os.environ.get("KIND", "narrow")
w = torch.ones(2, 4, requires_grad=True, device=dev); x = torch.arange(8.0).view(2, 4).to(dev)
if KIND == "narrow": print(torch.ones((), device=dev).expand(2, 6).narrow(1, 1, 4).cpu().tolist())
if KIND == "slice": print((torch.ones((), device=dev).expand(2, 6)[:, 1:5] * 2).cpu().tolist())
if KIND == "pad_mean": F.pad(x * w, (1, 1)).mean().backward(); print(w.grad.cpu().tolist())
if KIND == "pad_sum": F.pad(x * w, (1, 1)).sum().backward(); print(w.grad.cpu().tolist())
if KIND == "pad_ce":
    F.cross_entropy(F.pad(x * w, (1, 1)), torch.tensor([0, 1]).to(dev)).backward(); print(w.grad.cpu().tolist())
if KIND == "conv_pad":
    c = torch.nn.Conv1d(1, 1, 3).to(dev); c(F.pad(x.view(2, 1, 4), (1, 1), mode="reflect")).sum().backward(); print(c.weight.grad.cpu().tolist())
