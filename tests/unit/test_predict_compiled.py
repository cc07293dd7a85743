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
        self.body = torch.compile(nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 3)))
    def forward(self, x):
        return self.body(x) * scaled(torch.ones(3)).to(x.device)

def build_model():
    return Model()

def make_batch(batch_size):
    return torch.randn(batch_size, 10), torch.randint(0, 3, (batch_size,))
"""


def test_a_compiled_model_and_function_are_predicted_as_their_eager_calls_with_a_note(tmp_path):
    """What runs on realdml (torch 2.4.1): a compiled nn.Sequential of torch.nn layers taking device tensors, and a
    compiled function of CPU tensors only, each eagerly."""
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


FAILING_ON_DIRECTML = """
import functools
import torch
import torch._dynamo
import torch.nn.utils.prune
from torch import nn

def block(h):
    return torch.nn.functional.gelu(h) * 2 + 1

class Own(nn.Module):
    def forward(self, h):
        return block(h)

def made(h):
    return h.to(DEVICE) * 2

def closure(w):
    return lambda h: h.to(w.device) * w

def hooked(module, kind="forward"):
    if kind == "forward":
        module[0].register_forward_hook(lambda mod, args, out: out * 1.0)
    elif kind == "pre":
        module[0].register_forward_pre_hook(lambda mod, args: None)
    else:
        module[0].register_full_backward_hook(lambda mod, grad_in, grad_out: None)
    return module

def scale(mod, args, out, factor=1.0):
    return out * factor

class Scaler:  # a hook object of the model's own class
    def __call__(self, mod, args, out):
        return out * 1.0

def hooked_by(hook, module):
    module.register_forward_hook(hook)
    return module

def pre_hooked_by(hook, module):
    module.register_forward_pre_hook(hook)
    return module

def inner_hooked(kept):
    hooked_by(scale, kept.lin)  # runs under the forward kept from Dynamo
    return kept

def pruned(linear):
    torch.nn.utils.prune.l1_unstructured(linear, "weight", amount=0.3)
    return linear

class KeptFromDynamo(nn.Module):  # a forward the model keeps from Dynamo (as while debugging)
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
    @torch.compiler.disable
    def forward(self, h):
        return torch.nn.functional.gelu(self.lin(h))

def globally_hooked(call, h):
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: None)
    try:
        return call(h)  # the compiled call, under a global hook
    finally:
        handle.remove()

def dynamo_off():
    torch._dynamo.config.disable = True  # as while debugging: set before the model compiles (the test undoes it)

def suppressed(call, h):
    torch._dynamo.config.suppress_errors = True
    try:
        return call(h)
    finally:
        torch._dynamo.config.suppress_errors = False

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.head = nn.Linear(8, 8), nn.Linear(8, 3)
        self.block = COMPILED
    def forward(self, x):
        global DEVICE
        DEVICE = x.device
        h = self.lin(x)
        return self.head(CALL)  # the compiled call

def build_model():
    return Model()

def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 3, (batch_size,))
"""

#: (what is compiled, how it is called): each raises on realdml (torch 2.4.1 + torch-directml 0.2.5, re-probe 20 case 1)
FAILING = {
    "function, aot_eager": ('torch.compile(block, backend="aot_eager")', "self.block(h)"),
    "function, inductor": ("torch.compile(block)", "self.block(h)"),
    "function, eager, fullgraph, dynamic": ('torch.compile(block, backend="eager", fullgraph=True, dynamic=True)',
                                            "self.block(h)"),
    "decorator": ('torch.compile(backend="eager")(block)', "self.block(h)"),
    "module of its own class": ("torch.compile(Own())", "self.block(h)"),
    "Module.compile() of its own class": ("Own()", "(self.block.compile(), self.block(h))[1]"),
    "CPU in, a device tensor from its closure": ("None", 'torch.compile(closure(h), backend="eager")(h.cpu())'),
    "torch._dynamo.optimize, function": ('torch._dynamo.optimize("eager")(block)', "self.block(h)"),
    "torch.nn Sequential, fullgraph": ("torch.compile(nn.Sequential(nn.GELU()), fullgraph=True)", "self.block(h)"),
    # re-probe 21, case 4, measured on realdml: Dynamo traces a forward hook's frame
    "torch.nn Sequential, a forward hook": ("torch.compile(hooked(nn.Sequential(nn.GELU())))", "self.block(h)"),
    "torch.nn Sequential, a forward pre-hook": ('torch.compile(hooked(nn.Sequential(nn.GELU()), "pre"))',
                                                "self.block(h)"),
    "torch.nn Sequential, a global forward hook": ("torch.compile(nn.Sequential(nn.GELU()))",
                                                   "globally_hooked(self.block, h)"),
    # re-probe 22, cases 2 and 3's edges, measured on realdml: torch's own hook beside one of the model's; the model's
    # hook as a functools.partial or an object of its own class (Dynamo traces each)
    "torch.nn Sequential, weight_norm and a hook of the model's": (
        "torch.compile(hooked(nn.Sequential(nn.utils.weight_norm(nn.Linear(8, 8)), nn.GELU())))", "self.block(h)"),
    "torch.nn Sequential, the model's hook as functools.partial": (
        "torch.compile(hooked_by(functools.partial(scale, factor=0.5), nn.Sequential(nn.GELU())))", "self.block(h)"),
    "torch.nn Sequential, the model's hook object": ("torch.compile(hooked_by(Scaler(), nn.Sequential(nn.GELU())))",
                                                     "self.block(h)"),
    # a forward hook on a module inside, even one kept from Dynamo: Dynamo inlines that module's call (measured)
    "torch.nn Sequential, a hook kept from Dynamo on its Linear": (
        "torch.compile(nn.Sequential(hooked_by(torch.compiler.disable(scale), nn.Linear(8, 8)), nn.GELU()))",
        "self.block(h)"),
}


@pytest.mark.parametrize("case", sorted(FAILING))
def test_a_compiled_call_that_fails_on_torch_directml_fails_the_prediction_at_its_line(tmp_path, case):
    """Re-probe 20, case 1: Dynamo was off for the prediction and every compiled call ran eagerly, so ``check
    --target dml`` passed where realdml raises InternalTorchDynamoError at the first call (Dynamo's fake tensors
    read the storage torch-directml's tensors lack); a torch.nn module with fullgraph=True: Unsupported."""
    from dmlprof.runner import ScanStopped

    compiled, call = FAILING[case]
    path = tmp_path / "compiled_block.py"
    path.write_text(FAILING_ON_DIRECTML.replace("COMPILED", compiled).replace("CALL", call), encoding="utf-8")
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(path, batch_size=2)
    said = str(stopped.value)
    assert "torch.compile cannot trace torch-directml's tensors" in said
    caller = "        return call(h)  # the compiled call, under a global hook" if "globally_hooked" in call else \
        "        return self.head(CALL)  # the compiled call"
    line = 1 + FAILING_ON_DIRECTML.splitlines().index(caller)
    assert f"compiled_block.py:{line})" in said  # the model's line that called it
    assert "aten::addmm" in set(stopped.value.session.ops["op"])  # the calls before it are predicted


def test_the_known_error_reads_the_fullgraph_break_as_directmls():
    from dmlprof.backends.errors import explain_device_error
    from dmlprof.directml.compiled_on_directml import _fullgraph_break, _no_fake_tensor

    assert explain_device_error(_fullgraph_break()).key == "dml_torch_compile"
    assert explain_device_error(_no_fake_tensor()).key == "dml_torch_compile"


#: each runs on realdml: torch.nn's own modules (Dynamo skips their code, graph-breaking at their device input), and a
#: function of CPU tensors moving its result to the device inside (Dynamo fakes the CPU tensor, never a device one)
RUNNING = {
    "torch.nn Sequential": ("torch.compile(nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8)))",
                            "self.block(h)"),
    "torch.nn Module.compile()": ("nn.Sequential(nn.GELU())", "(self.block.compile(), self.block(h))[1]"),
    "CPU in, moved to the device inside": ('torch.compile(made, backend="eager")', "self.block(h.cpu())"),
    "function, suppress_errors": ("torch.compile(block)", "suppressed(self.block, h)"),
    "torch._dynamo.optimize, torch.nn Sequential": ('torch._dynamo.optimize("eager")(nn.Sequential(nn.GELU()))',
                                                    "self.block(h)"),
    # measured on realdml: a backward hook is not traced; Dynamo off by the model's hand runs everything eagerly
    # (re-probe 21, case 5)
    "torch.nn Sequential, a backward hook": ('torch.compile(hooked(nn.Sequential(nn.GELU()), "backward"))',
                                             "self.block(h)"),
    "function, Dynamo disabled by the model": ("(dynamo_off(), torch.compile(block))[1]", "self.block(h)"),
    # re-probe 22, case 2: torch's own forward pre-hooks (Dynamo skips torch's code as it skips torch.nn's modules)
    "torch.nn Sequential, weight_norm": ("torch.compile(nn.Sequential(nn.utils.weight_norm(nn.Linear(8, 8)), "
                                         "nn.GELU()))", "self.block(h)"),
    "torch.nn Sequential, spectral_norm": ("torch.compile(nn.Sequential(nn.utils.spectral_norm(nn.Linear(8, 8)), "
                                           "nn.GELU()))", "self.block(h)"),
    "torch.nn Sequential, prune": ("torch.compile(nn.Sequential(pruned(nn.Linear(8, 8)), nn.GELU()))",
                                   "self.block(h)"),
    # case 3: what the model keeps from Dynamo (torch.compiler.disable) is not traced, nor anything it calls
    "torch.nn Sequential, the model's hook kept from Dynamo": (
        "torch.compile(hooked_by(torch.compiler.disable(scale), nn.Sequential(nn.GELU())))", "self.block(h)"),
    "torch.nn Sequential, the hook kept by torch._dynamo.disable": (
        "torch.compile(hooked_by(torch._dynamo.disable(scale), nn.Sequential(nn.GELU())))", "self.block(h)"),
    "torch.nn Sequential, a pre-hook kept from Dynamo on its Linear": (
        "torch.compile(nn.Sequential(pre_hooked_by(torch.compiler.disable(lambda mod, args: None), nn.Linear(8, 8)), "
        "nn.GELU()))", "self.block(h)"),
    "module of its own class, its forward kept from Dynamo": ("torch.compile(KeptFromDynamo())", "self.block(h)"),
    "torch.nn Sequential holding it": ("torch.compile(nn.Sequential(KeptFromDynamo(), nn.GELU()))", "self.block(h)"),
    "torch.nn Sequential holding it, a hook of the model's inside it": (
        "torch.compile(nn.Sequential(inner_hooked(KeptFromDynamo()), nn.GELU()))", "self.block(h)"),
}


@pytest.mark.parametrize("case", sorted(RUNNING))
def test_a_compiled_call_that_runs_on_torch_directml_is_predicted_as_its_eager_calls(tmp_path, case):
    compiled, call = RUNNING[case]
    path = tmp_path / "compiled_block.py"
    path.write_text(FAILING_ON_DIRECTML.replace("COMPILED", compiled).replace("CALL", call), encoding="utf-8")
    try:
        session = predict_scan(path, batch_size=2)
    finally:
        if "torch._dynamo" in __import__("sys").modules:
            torch._dynamo.config.disable = False  # the model's own setting outlives its prediction, as it should
    assert {"aten::gelu", "aten::mul.Tensor"} & set(session.ops["op"]) and not session.meta.partial_reason


OPTIMIZER_MODEL = """
import torch
from torch import nn

OPT = None

@torch.compile(backend="aot_eager")
def global_step():
    type(OPT).step(OPT)  # the class's step: the instance's calls this function

@torch.compile(backend="aot_eager")
def argument_step(opt):
    type(opt).step(opt)

def build_model():
    return nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 3))

def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 3, (batch_size,))

def make_optimizer(params):
    global OPT
    opt = OPT = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    step = opt.step
    COMPILED_STEP
    return opt
"""

#: a compiled optimizer step: each raises InternalTorchDynamoError at the first step on realdml (re-probe 22, case 6)
OPTIMIZER_FAILING = {
    "opt.step compiled (the tutorial's idiom)": 'opt.step = torch.compile(opt.step, backend="aot_eager")',
    "a compiled function calling the bound step from its closure": (
        'opt.step = torch.compile(lambda: step(), backend="aot_eager")'),
    "a compiled function stepping a global optimizer": "opt.step = lambda: global_step()",
    "a compiled function stepping the optimizer it is given": "opt.step = lambda: argument_step(opt)",
}


@pytest.mark.parametrize("case", sorted(OPTIMIZER_FAILING))
def test_a_compiled_optimizer_step_fails_the_prediction_as_on_torch_directml(tmp_path, case):
    """Re-probe 22, case 6: the device tensors sit in the optimizer (its param_groups and state), which the rule
    never read: a bound method's object, an optimizer in a closure, a global or an argument; check passed."""
    from dmlprof.runner import ScanStopped

    path = tmp_path / "compiled_step.py"
    path.write_text(OPTIMIZER_MODEL.replace("COMPILED_STEP", OPTIMIZER_FAILING[case]), encoding="utf-8")
    with pytest.raises(ScanStopped, match="torch.compile cannot trace torch-directml's tensors"):
        predict_scan(path, batch_size=2)


@pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)
def test_a_compiled_function_of_device_tensors_is_predicted_as_its_eager_calls_on_xpu(tmp_path):
    """Inductor compiles it for XPU: only DirectML's prediction fails it."""
    path = tmp_path / "compiled_block.py"
    source = FAILING_ON_DIRECTML.replace("COMPILED", "torch.compile(block)").replace("CALL", "self.block(h)")
    path.write_text(source, encoding="utf-8")
    session = predict_scan(path, batch_size=2, target="xpu")
    assert "aten::gelu" in set(session.ops["op"])


SEQUENTIAL_MODEL = """
import torch
from torch import nn

def build_model():
    return torch.compile(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)), fullgraph=FULLGRAPH)

def make_batch(batch_size):
    return torch.randn(batch_size, 6), torch.randint(0, 2, (batch_size,))
"""


@pytest.mark.parametrize("fullgraph", [False, True])
def test_fullgraph_is_predicted_and_dynamo_compiles_again_after_the_prediction(tmp_path, fullgraph):
    """Re-probe 15: ``fullgraph=True`` raised "found no compiled frames" under the prediction (torch 2.13), and the
    frames Dynamo met while it was off stayed skipped (torch 2.4: marked on their code objects): a later compile of
    the same classes in the process compiled none of them (plainly: one frame). On realdml the Sequential runs,
    eagerly; with fullgraph=True it raises Unsupported (the graph break at its device input)."""
    import torch._dynamo.testing
    from torch import nn

    from dmlprof.runner import ScanStopped

    path = tmp_path / "fullgraph_model.py"
    path.write_text(SEQUENTIAL_MODEL.replace("FULLGRAPH", str(fullgraph)), encoding="utf-8")
    if fullgraph:
        with pytest.raises(ScanStopped, match="fullgraph=True"):
            predict_scan(path, batch_size=2)
    else:
        assert "aten::addmm" in set(predict_scan(path, batch_size=2).ops["op"])
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
