"""Re-probe 17: re-probe 16's fix of 15 gave the prediction torch-directml's dropout mask (float32, the input's
dtype), but the live emulated DirectML device (every script under `--target dml` / `--device emulated-dml`) still
returns the CPU's bool mask: a script that uses the mask passes `check` and fails on DirectML.

    PYTHONPATH=. python -m dmlprof check docs/probe17/live_emulated_dropout_mask_bool.py --target dml --from cuda

Got: "mask torch.bool", "kept 16", "check ... passed", exit 0. Real torch-directml (realdml, torch 2.4.1 +
torch-directml 0.2.5, `-- dml`): "mask torch.float32", then IndexError "tensors used as indices must be long, int,
byte or bool tensors" at `x[mask]`. The same body in a model file under `scan --target dml` sees float32 (the
prediction's stand-in), so the two paths disagree.
"""
import sys

import torch

if "dml" in sys.argv[1:]:
    import torch_directml
    dev = torch_directml.device()
else:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
x = torch.randn(4, 8).to(dev)
out, mask = torch.native_dropout(x, 0.5, True)
print("mask", mask.dtype)
kept = x[mask]                      # the kept activations (an MC-dropout / R-Drop style diagnostic)
print("kept", kept.numel())
