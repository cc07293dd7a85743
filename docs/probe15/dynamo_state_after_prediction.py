"""Re-probe 15: after a prediction of a model that compiles, Dynamo in the same process compiles nothing it saw.

The Python API (a notebook): predict a model file whose build_model returns torch.compile(Sequential(Linear, ReLU,
Linear)) for xpu, then compile a fresh model of the same classes in that process.

    PYTHONPATH=. python docs/probe15/dynamo_state_after_prediction.py

torch 2.13: "frames compiled 0" (plainly 1: the new model runs uncompiled, silently), then `torch.compile(nn.Linear(3,
3), fullgraph=True)` raises "RuntimeError: torch.compile with fullgraph=True found no compiled frames"; torch 2.4.1:
"frames compiled 0" too. Without the prediction (`-- without`) both compile (1 frame, the fullgraph call runs).
`torch._dynamo.config.disable` is restored to False; what stays is Dynamo's per-code-object decision, taken while
it was disabled, to skip nn.Linear.forward / nn.Sequential.forward and the rest (torch._dynamo.reset() clears it).
"""
import pathlib
import sys
import tempfile

import torch
import torch._dynamo.testing
import torch.nn as nn

MODEL = '''
import torch, torch.nn as nn
BATCH_SIZE = 4
def build_model():
    torch.manual_seed(0)
    return torch.compile(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)))
def make_batch(b):
    return torch.randn(b, 6), torch.randint(0, 2, (b,))
'''

if sys.argv[1:] != ["without"]:
    from dmlprof.predict import predict_scan

    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "compiled_model.py"
        path.write_text(MODEL)
        print(predict_scan(str(path), target="xpu"))
counter = torch._dynamo.testing.CompileCounter()
fresh = torch.compile(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)), backend=counter)
fresh(torch.ones(2, 6))
print("frames compiled", counter.frame_count)
print("fullgraph", torch.compile(nn.Linear(3, 3), fullgraph=True)(torch.ones(2, 3)).shape)
