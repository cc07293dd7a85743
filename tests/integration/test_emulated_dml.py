"""Live verdicts on the emulated DirectML device equal the device's own fallback counts.

The emulated backend (dmlprof.testing) counts every call that reaches its
boxed CPU fallback; dmlprof's recorder knows nothing of those counters and
reads fallbacks from torch-directml's warning text, as it does on real
DirectML. For each model in models/ and for Adam, AdamW and SGD-with-momentum
steps, the two must agree call for call.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted(p for p in (ROOT / "models").glob("*.py") if not p.name.startswith("_"))

# A small model whose optimizer comes from the test (the model contract's make_optimizer).
OPTIMIZER_MODEL = '''
import torch
from torch import nn

def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 8, generator=g), torch.randint(0, 4, (batch_size,), generator=g)

def make_optimizer(params):
    return {factory}
'''
OPTIMIZERS = {
    # name: (constructor, ops that must fall back, parameters -> calls)
    "adam": ("torch.optim.Adam(params, lr=1e-3)", {"aten::lerp.Scalar_out"}),
    "adamw": ("torch.optim.AdamW(params, lr=1e-3)", {"aten::lerp.Scalar_out"}),
    "sgd_momentum": ("torch.optim.SGD(params, lr=0.01, momentum=0.9)", set()),
}


@pytest.fixture
def backend(emulated_dml_backend):
    return emulated_dml_backend


def reported_fallbacks(session) -> Counter:
    """Fallback calls per inner op, as dmlprof reports them (from the warnings)."""
    from dmlprof.schema import parse_fallback_ops

    total: Counter = Counter()
    for text in session.ops.loc[session.ops["verdict"] == "fallback", "fallback_ops"]:
        total.update(parse_fallback_ops(text))
    return total


def scan_and_compare(path, backend) -> tuple:
    from dmlprof.runner import ScanStopped, scan

    backend.reset_fallback_counts()
    try:
        session = scan(path, device="emulated-dml", steps=1, warmup=0, batch_size=2, backend=backend)
    except ScanStopped as stopped:
        # As on real DirectML: an op with no DirectML kernel falls back, and
        # the step fails when the CPU has no kernel either (nn.LSTM's
        # _thnn_fused_lstm_cell, microsoft/DirectML#613). Anything else is a bug.
        failed = re.search(r"Could not run '([^']+)' with arguments from the 'CPU' backend", str(stopped))
        assert failed, f"scan stopped for another reason: {stopped}"
        assert failed.group(1) in backend.fallback_counts(), str(stopped)
        session = stopped.session
        assert session.meta.to_dict()["partial"]
        # The call that broke the step is in the partial session, as a fallback.
        assert (session.ops["fallback_ops"].str.contains(failed.group(1), regex=False)).any()
    oracle = Counter(backend.fallback_counts())
    reported = reported_fallbacks(session)
    assert session.meta.to_dict()["backend"] == "emulated-dml"
    assert reported == oracle, (
        f"dmlprof reported {dict(reported)} but the device counted {dict(oracle)}; "
        f"missed {dict(oracle - reported)}, extra {dict(reported - oracle)}"
    )
    # Every row that names fallbacks has the fallback verdict, and only those.
    ops = session.ops
    assert ((ops["fallback_calls"] > 0) == (ops["verdict"] == "fallback")).all()
    return session, oracle


def test_models_exist():
    assert MODELS, "models/ holds no model files"


# Fallbacks BACKEND_FACTS.md says these models' layers reach on DirectML, on every torch we run.
EXPECTED_FALLBACKS = {
    "groupnorm_net": {"aten::native_group_norm_backward"},
    "recommender": {"aten::_embedding_bag", "aten::log_sigmoid_forward"},
    "lstm_forecaster": {"aten::_thnn_fused_lstm_cell"},
}


# groupnorm_net in the quick subset: it builds the device and checks a fallback against the device's own count
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.quick) if p.stem == "groupnorm_net" else p
                                  for p in MODELS], ids=[p.stem for p in MODELS])
def test_model_verdicts_equal_device_counts(path, backend):
    session, oracle = scan_and_compare(path, backend)
    expected = EXPECTED_FALLBACKS.get(path.stem, set())
    assert expected <= set(oracle), f"expected {expected} to fall back, device counted {dict(oracle)}"


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_step_verdicts_equal_device_counts(name, backend, tmp_path):
    factory, must_fall_back = OPTIMIZERS[name]
    model = tmp_path / f"opt_{name}.py"
    model.write_text(OPTIMIZER_MODEL.format(factory=factory), encoding="utf-8")
    session, oracle = scan_and_compare(model, backend)
    assert must_fall_back <= set(oracle), f"expected {must_fall_back} to fall back, device counted {dict(oracle)}"
    optimizer_rows = session.ops[session.ops["phase"] == "optimizer"]
    for op in must_fall_back:
        # Adam/AdamW's foreach lerp loops over parameters: one fallback call per parameter.
        assert oracle[op] == 4  # 2 Linear layers x (weight, bias)
        assert optimizer_rows["fallback_ops"].str.contains(op, regex=False).any()


def test_fallback_warning_text_and_once_semantics(backend):
    """torch-directml's exact words; once per process unless warn_always."""
    import subprocess
    import sys

    code = (
        "import warnings, torch\n"
        "from dmlprof import testing\n"
        "testing.load()\n"
        "warnings.simplefilter('always')\n"
        "x = torch.ones(3).to('privateuseone')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(3): torch.lerp(x, x, 0.5)\n"
        "    once = [str(w.message) for w in caught]\n"
        "    torch.set_warn_always(True)\n"
        "    for _ in range(3): torch.lerp(x, x, 0.5)\n"
        "    always = [str(w.message) for w in caught][len(once):]\n"
        "print(len(once), len(always)); print(once[0])\n"
        "print(testing.fallback_counts()['aten::lerp.Scalar_out'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "1 3"
    # torch appends where the warning was raised, as it does for torch-directml's
    # "(Triggered internally at ...dml_cpu_fallback.cpp:17.)".
    assert lines[1].startswith(
        "The operator 'aten::lerp.Scalar_out' is not currently supported on the DML backend and will fall back "
        "to run on the CPU. This may have performance implications. (Triggered internally at "
    )
    assert lines[2] == "6"  # every call counted, warned or not


def test_exit_handler_lets_the_device_thread_drop_its_last_graph_task(backend):
    """At exit the device's backward thread must not still hold a graph task whose thread-local state has a
    Python object (torch >= 2.6 stashes one per backward): it would need the GIL during finalization and
    end the process with SIGABRT. The handler load() registers runs one more backward through that
    thread, without a stash, and waits for it: the thread takes it only after dropping the one before."""
    import subprocess
    import sys

    code = (
        "import threading, torch\n"
        "from dmlprof import testing\n"
        "testing.load()\n"
        "engine = torch.autograd.Variable._execution_engine\n"
        "ran_on = []\n"
        "class Watching:\n"
        "    def run_backward(self, tensors, *rest):\n"
        "        tensors[0].grad_fn.register_prehook(lambda g: ran_on.append(threading.get_ident()))\n"
        "        result = engine.run_backward(tensors, *rest)\n"
        "        ran_on.append('done')\n"
        "        return result\n"
        "x = torch.ones(4, device='privateuseone:0', requires_grad=True)\n"
        "(x * 3).sum().backward()\n"
        "torch.autograd.Variable._execution_engine = Watching()\n"
        "torch.set_default_dtype(torch.float64)\n"  # a program may leave either behind: the drain still runs
        "torch.set_grad_enabled(False)\n"
        "testing._drain_device_backward_thread_at_exit()\n"
        "print(ran_on[0] != threading.get_ident(), ran_on[1:])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True ['done']"  # on the device's thread, and it finished


def test_native_kernels_match_the_shipped_table(backend):
    """The device's computed PrivateUse1 entry equals torch-directml's, op for op, where torch knows the op;
    beside them only the kernels that refuse the view scatters with torch-directml's words (they fail on
    every torch-directml tensor, while torch's composite would run on this device's)."""
    import torch

    from dmlprof.directml.failures import ALWAYS_FAILING_COMPOSITES
    from dmlprof.tables import live_table, load_table
    from dmlprof.testing import skipped_ops

    shipped = load_table("dml")
    live = live_table("PrivateUse1")
    registered = [n for n in shipped.registrations["PrivateUse1"] if n not in set(skipped_ops())]
    assert all(live.kind(n) == "native" for n in registered if n.startswith("aten::"))
    refusals = {n for n in ALWAYS_FAILING_COMPOSITES if live.kind(n) is not None}
    assert refusals and all(live.kind(n) == "native" for n in refusals)
    assert set(live.ops("native")) == {n for n in registered if n.startswith("aten::")} | refusals
    if torch.__version__.split("+")[0] == shipped.torch_version:
        # Same torch as the table was read against: every op resolves the same way (but the refusals).
        ops = [op for op in shipped.ops() if op not in refusals]
        assert {op: live.kind(op) for op in ops} == {op: shipped.kind(op) for op in ops}


def test_tensors_and_backward_on_the_device(backend):
    import torch

    from dmlprof import testing

    x = torch.randn(4, 3, requires_grad=True)
    y = x.to("privateuseone")
    assert str(y.device) == "privateuseone:0"
    (y.view(2, 6).sum() * 2).backward()
    assert torch.equal(x.grad, torch.full((4, 3), 2.0))
    conv = torch.nn.Conv2d(1, 2, 3).to("privateuseone")
    out = conv(torch.randn(1, 1, 5, 5).to("privateuseone"))
    out.sum().backward()
    assert conv.weight.grad.device.type == "privateuseone" and out.shape == (1, 2, 3, 3)
    assert "aten::convolution_overrideable" in testing.real_kernel_ops()


def test_a_float16_mean_on_the_device_is_the_cpus_mean(backend):
    import torch

    # torch 2.4's CPU mean.out for float16 re-seats its out on a float copy: run through the fallback's copy of
    # the out, the device's mean read whatever memory held (a different value each call)
    x = torch.randn(3, 4, 5).to(torch.float16)
    device_x = x.to("privateuseone")
    for dims, keepdim in [((2, 1, 0), True), ((1,), False), (None, False)]:
        expected = x.mean(dims, keepdim=keepdim) if dims else x.mean()
        for _ in range(3):
            got = device_x.mean(dims, keepdim=keepdim) if dims else device_x.mean()
            assert torch.equal(got.cpu(), expected), (dims, got.cpu(), expected)
    out = torch.empty(0, dtype=torch.float16, device="privateuseone:0")
    torch.mean(device_x, [2], out=out)
    assert torch.equal(out.cpu(), x.mean([2]))
