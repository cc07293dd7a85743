"""Re-probe 15: a model file compiled through `torch._dynamo.optimize("inductor")` (the pre-torch.compile spelling,
still in older repositories), predicted: Inductor on the stand-ins again, read as the model's failure.

    PYTHONPATH=. python -m dmlprof scan docs/probe15/dynamo_optimize_predicted.py --target xpu   (or dml, mps)

exit 3, "step 1 raised InductorError: KeyError: 'privateuseone'" (torch 2.13); on the CPU (`scan` alone) exit 0. The
re-probe 14 fix wraps `torch.compile` (dmlprof/predict/compiled.py) and turns Dynamo off only once it is called;
`torch._dynamo.optimize` never calls it. Turning Dynamo off for the whole prediction (or hooking Dynamo's own entry)
would cover every spelling.
"""
import torch, torch.nn as nn, torch._dynamo
BATCH_SIZE = 8
def build_model():
    torch.manual_seed(0)
    return torch._dynamo.optimize("inductor")(nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 3)))
def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 10, generator=g), torch.randint(0, 3, (batch_size,), generator=g)
