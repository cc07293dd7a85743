"""``torch.compile`` under a prediction (re-probe 14, case 14): the compiled code is predicted as its eager calls.

Before: Dynamo faked the stand-in's tensors and Inductor lowered for a device it cannot build code for, and the
prediction ended in "InductorError: LoweringException" (torch 2.4.1: "BackendCompilerFailed"), read as the model's
failure, on every target. Real devices run it: XPU and MPS compile it, torch-directml runs it eagerly.
"""
from __future__ import annotations

import textwrap

import pytest
import torch

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.live  # torch-version-sensitive (Dynamo): runs on torch 2.4.1 too

COMPILED_MODEL = """
import torch
from torch import nn

@torch.compile
def scaled(x):
    return x * 2 + 1

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 3))
    def forward(self, x):
        return self.body(scaled(x))

def build_model():
    return torch.compile(Model())

def make_batch(batch_size):
    return torch.randn(batch_size, 10), torch.randint(0, 3, (batch_size,))
"""


def test_a_compiled_model_and_function_are_predicted_as_their_eager_calls_with_a_note(tmp_path):
    path = tmp_path / "compiled_model.py"
    path.write_text(textwrap.dedent(COMPILED_MODEL), encoding="utf-8")
    compile_before = torch.compile
    session = predict_scan(path, batch_size=2)
    ops = set(session.ops["op"])
    assert {"aten::addmm", "aten::gelu", "aten::native_layer_norm", "aten::mul.Tensor"} <= ops  # each op, eagerly
    assert "aten::native_layer_norm_backward" in ops
    notes = [note for note in session.meta.notes if note.startswith("torch.compile:")]
    assert len(notes) == 1 and "eager" in notes[0] and "torch-directml" in notes[0]
    assert torch.compile is compile_before  # the process's torch.compile is its own again
    if "torch._dynamo" in __import__("sys").modules:
        assert not torch._dynamo.config.disable  # and Dynamo traces again outside the prediction



SEQUENTIAL_MODEL = """
import torch
from torch import nn

def build_model():
    return torch.compile(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)), fullgraph=True)

def make_batch(batch_size):
    return torch.randn(batch_size, 6), torch.randint(0, 2, (batch_size,))
"""


def test_fullgraph_is_predicted_and_dynamo_compiles_again_after_the_prediction(tmp_path):
    """Re-probe 15: ``fullgraph=True`` raised "found no compiled frames" under the prediction (torch 2.13), and the
    frames Dynamo met while it was off stayed skipped (torch 2.4: marked on their code objects): a later compile of
    the same classes in the process compiled none of them (plainly: one frame)."""
    import torch._dynamo.testing
    from torch import nn

    path = tmp_path / "fullgraph_model.py"
    path.write_text(textwrap.dedent(SEQUENTIAL_MODEL), encoding="utf-8")
    session = predict_scan(path, batch_size=2)  # (DirectML: xpu cannot be predicted beside the emulated device)
    assert "aten::addmm" in set(session.ops["op"])
    counter = torch._dynamo.testing.CompileCounter()
    fresh = torch.compile(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)), backend=counter)
    fresh(torch.ones(2, 6))
    assert counter.frame_count == 1
