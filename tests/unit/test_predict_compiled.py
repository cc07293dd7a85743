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


OPTIMIZED_MODEL = """
import torch, torch.nn as nn, torch._dynamo

def build_model():
    return torch._dynamo.optimize("inductor")(nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 3)))

def make_batch(batch_size):
    return torch.randn(batch_size, 10), torch.randint(0, 3, (batch_size,))
"""


def _predicted_calls_and_notes(path) -> tuple:
    session = predict_scan(path, batch_size=2)
    return set(session.ops["op"]), [note for note in session.meta.notes if note.startswith("torch.compile:")]


def test_a_model_compiled_through_dynamo_optimize_is_predicted_as_its_eager_calls(tmp_path):
    """Re-probe 15 case 24: ``torch._dynamo.optimize("inductor")`` never calls ``torch.compile``; Inductor lowered
    for the stand-in ("InductorError: KeyError: 'privateuseone'"; torch 2.4.1: "BackendCompilerFailed"), exit 3.
    Here Dynamo is imported already: its ``optimize`` is wrapped at once, and is its own again afterwards."""
    import sys

    import torch._dynamo

    path = tmp_path / "optimized_model.py"
    path.write_text(textwrap.dedent(OPTIMIZED_MODEL), encoding="utf-8")
    optimize_before = torch._dynamo.optimize
    ops, notes = _predicted_calls_and_notes(path)
    assert {"aten::addmm", "aten::gelu"} <= ops and len(notes) == 1
    assert torch._dynamo.optimize is optimize_before
    assert not [finder for finder in sys.meta_path if type(finder).__module__ == "dmlprof.predict.compiled"]
    assert not torch._dynamo.config.disable


def test_dynamo_optimize_is_wrapped_when_the_model_file_imports_dynamo_first(tmp_path):
    """The case as a user meets it: nothing imported Dynamo before the model file did (a fresh process)."""
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "optimized_model.py"
    path.write_text(textwrap.dedent(OPTIMIZED_MODEL), encoding="utf-8")
    code = ("import sys; from pathlib import Path; from dmlprof.predict import predict_scan\n"
            "assert 'torch._dynamo' not in sys.modules\n"
            f"session = predict_scan(Path({str(path)!r}), batch_size=2)\n"
            "import torch._dynamo\n"
            "print('addmm' if 'aten::addmm' in set(session.ops['op']) else 'no addmm',\n"
            "      sum(note.startswith('torch.compile:') for note in session.meta.notes),\n"
            "      getattr(torch._dynamo.optimize, '__wrapped__', None) is None, torch._dynamo.config.disable)\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(root),
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["addmm", "1", "True", "False"]


def test_forgetting_dynamos_skip_marks_passes_over_a_dead_weak_proxy():
    """Found with case 24's test: ``isinstance`` on a dead ``weakref.proxy`` among the garbage collector's objects
    raised ReferenceError as the prediction ended (whatever the model, once Dynamo was used)."""
    import weakref

    import torch._dynamo

    from dmlprof.predict.compiled import _forget_what_dynamo_skipped

    class Held:
        pass

    held = Held()
    proxies = [weakref.proxy(held)]
    del held
    _forget_what_dynamo_skipped()
    assert len(proxies) == 1


def test_the_note_says_inductor_only_where_inductor_was_the_backend():
    """Re-probe 17, 23: under --target xpu the note said "Inductor compiles it into kernels of its own" for
    ``backend="aot_eager"`` and a custom backend too, which run the eager calls listed."""
    from dmlprof.predict.compiled import compiled_code_runs_eagerly

    def my_backend(graph_module, example_inputs):
        return graph_module.forward

    with compiled_code_runs_eagerly() as seen:
        torch.compile(lambda x: x + 1, backend="aot_eager", fullgraph=True)
        torch.compile(lambda x: x * 2, backend=my_backend)
    note = seen.note("XPU")
    assert seen.backends == {"aot_eager", "my_backend"}
    assert "Inductor" not in note and "aot_eager, my_backend backends run ATen's calls" in note
    with compiled_code_runs_eagerly() as seen:
        torch.compile(lambda x: x + 1)
    assert seen.backends == {"inductor"} and "Inductor compiles it into kernels of its own" in seen.note("XPU")
