"""Real code, unmodified: training scripts as users write them, and ATen paths a recorder must not change.

GIVEN scripts written for DirectML (``import torch_directml``) and for CUDA
(``device = "cuda"``, a DataLoader with workers and pinned memory), each meant
to run for thousands of steps, and programs whose ATen path a dispatch mode
would change
WHEN  they are scanned through the CLI on this CPU-only machine
THEN  they run unmodified, stop cleanly after the requested steps, and report
      what the emulated DirectML device really does.
"""
from __future__ import annotations

import os
import textwrap

import pytest

from conftest import FIXTURES, run_cli
from dmlprof.analysis.core import fallback_op_set
from dmlprof.session import Session

pytestmark = [pytest.mark.live, pytest.mark.slow]


def _report(tmp_path, *args, env=None, script_args=()):
    """(the finished process, the session it saved or None)."""
    out = tmp_path / "sessions"
    tail = ("--", *script_args) if script_args else ()
    done = run_cli("scan", *args, "--out", str(out), "--quiet", *tail, cwd=tmp_path, env=env)
    saved = sorted(out.glob("*.session.json"))
    return done, (Session.load(saved[-1]) if saved else None)


def _fallback_ops(session) -> set:
    """The calls that fell back, by the op called (``_foreach_lerp_.Scalar``) and by what fell back inside."""
    ops = session.ops
    return set(ops.loc[ops["verdict"] == "fallback", "op"]) | fallback_op_set(ops)


def test_a_directml_script_runs_unmodified_and_stops_after_its_steps(tmp_path):
    done, report = _report(tmp_path, FIXTURES / "dml_style_train.py", "--device", "emulated-dml", "--steps", "3")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    meta = report.meta.to_dict()
    # 1 unrecorded warm-up step, 3 recorded, then the 100,000-step script was stopped.
    assert meta["script_window"]["optimizer_steps_taken"] == 4 and meta["script_window"]["window_closed"]
    assert meta["steps"] == 3
    assert {"aten::native_group_norm_backward", "aten::_foreach_lerp_.Scalar"} <= _fallback_ops(report)


def test_a_cuda_script_predicted_for_directml_with_from_cuda(tmp_path):
    done, report = _report(tmp_path, FIXTURES / "cuda_style_train.py", "--target", "dml", "--from", "cuda",
                           "--steps", "2")
    assert done.returncode == 0, done.stderr
    meta = report.meta.to_dict()
    assert meta["backend"] == "emulated-dml" and meta["target"] == "dml" and meta["remapped_from"] == "cuda"
    assert any("emulated DirectML device" in note for note in meta["notes"])
    assert meta["script_window"]["optimizer_steps_taken"] == 3
    assert "aten::_foreach_lerp_.Scalar" in _fallback_ops(report)  # AdamW's lerp falls back on DirectML
    assert "device_unused" not in meta


def test_a_cuda_script_without_from_cuda_is_told_how(tmp_path):
    done, _ = _report(tmp_path, FIXTURES / "cuda_style_train.py", "--device", "emulated-dml", "--steps", "1")
    assert done.returncode != 0
    assert "--from cuda" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_directml_script_on_a_machine_without_torch_directml_is_told_how(tmp_path):
    # A machine without torch_directml, wherever the test runs (the torch 2.4.1 lane has it installed):
    # a package of that name found first that fails to import as a missing one does.
    shadow = tmp_path / "shadow" / "torch_directml"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch_directml'\", name='torch_directml')\n", encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))
    done, _ = _report(tmp_path, FIXTURES / "dml_style_train.py", "--device", "cpu", "--steps", "1",
                      env={"PYTHONPATH": path})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "torch_directml" in done.stderr and "--target dml" in done.stderr and "--device emulated-dml" in done.stderr


def test_a_script_that_checks_for_cuda_itself_is_told_about_from_cuda(tmp_path):
    script = tmp_path / "needs_cuda.py"
    script.write_text(textwrap.dedent("""
        import torch
        assert torch.cuda.is_available(), "this script needs a CUDA GPU"
        x = torch.ones(2, device="cuda")
        """), encoding="utf-8")
    done, _ = _report(tmp_path, script, "--device", "cpu", "--steps", "1")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "this script needs a CUDA GPU" in done.stderr and "--from cuda" in done.stderr
    done, _ = _report(tmp_path, script, "--device", "cpu", "--from", "cuda", "--steps", "1")
    assert "scan it with --from cuda" not in done.stderr, "no --from advice to a scan that already has it"


def test_a_script_that_never_used_the_device_says_so(tmp_path):
    script = tmp_path / "cpu_only.py"
    script.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(10):
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
        """), encoding="utf-8")
    done, report = _report(tmp_path, script, "--device", "emulated-dml", "--steps", "2")
    assert done.returncode == 0, done.stderr
    assert report.meta.to_dict()["device_unused"]["devices_used"] == ["cpu"]


def test_run_to_end_lets_the_script_finish_unrecorded(tmp_path):
    done, report = _report(tmp_path, FIXTURES / "train_script.py", "--device", "emulated-dml", "--steps", "2",
                           "--run-to-end", script_args=("--epochs", "6"))
    assert done.returncode == 0, done.stderr
    window = report.meta.to_dict()["script_window"]
    assert window["optimizer_steps_taken"] == 6 and window["window_closed"] and report.meta.to_dict()["steps"] == 2
    assert set(report.ops["step"]) == {0, 1}


def test_batch_size_on_a_script_is_a_usage_error(tmp_path):
    done, _ = _report(tmp_path, FIXTURES / "train_script.py", "--device", "cpu", "--batch-size", "8")
    assert done.returncode == 2
    assert "--batch-size" in done.stderr and "script" in done.stderr


CTC_MODEL = """
import torch
from torch import nn
import torch.nn.functional as F

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 6)
    def forward(self, x):
        return self.proj(x).log_softmax(-1).transpose(0, 1)

def build_model():
    torch.manual_seed(0)
    return Head()

def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 20, 8, generator=g), torch.randint(1, 6, (batch_size, 5), generator=g)

def loss_fn(log_probs, targets):
    # Lengths on the CPU, as the documentation says and cuDNN requires.
    n = targets.shape[0]
    return F.ctc_loss(log_probs, targets, torch.full((n,), 20, dtype=torch.long), torch.full((n,), 5, dtype=torch.long))
"""


@pytest.mark.parametrize("how", [("--device", "emulated-dml"), ("--target", "dml")], ids=["emulated", "predicted"])
def test_ctc_with_cpu_lengths_runs_and_reports_the_unrecorded_op(tmp_path, how):
    model = tmp_path / "ctc_model.py"
    model.write_text(CTC_MODEL, encoding="utf-8")
    done, report = _report(tmp_path, model, *how, "--steps", "1")
    assert done.returncode == 0, done.stderr
    assert {"aten::_ctc_loss", "aten::_ctc_loss_backward"} <= _fallback_ops(report)


DTYPE_MODEL = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)
    def forward(self, x):
        scale = torch.ones(2, dtype={dtype}, device=x.device)   # the line that asks for the dtype
        return self.lin(x) * scale.float()

def build_model():
    return Net()

def make_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)
"""


@pytest.mark.parametrize("dtype,words", [("torch.float64", "float64"), ("torch.bfloat16", "bfloat16")])
@pytest.mark.parametrize("how", [("--device", "emulated-dml"), ("--target", "dml")], ids=["emulated", "predicted"])
def test_dtypes_directml_refuses_fail_with_the_op_and_line(tmp_path, dtype, words, how):
    model = tmp_path / "typed_model.py"
    model.write_text(DTYPE_MODEL.format(dtype=dtype), encoding="utf-8")
    done, session = _report(tmp_path, model, *how, "--steps", "1")
    assert done.returncode == 4, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert words in line and "aten::ones" in line and "typed_model.py:10" in line, line
    assert session.meta.to_dict()["partial"] and session.meta.to_dict()["failed_op"] == "aten::ones"


def test_a_model_built_in_float64_moves_to_the_device_and_fails_at_its_first_computation(tmp_path):
    # as on real DirectML without float64 (docs/realdml.md): moving float64 tensors runs, the first op computing raises
    model = tmp_path / "double_model.py"
    model.write_text("import torch\nbuild_model = lambda: torch.nn.Linear(4, 2).double()\n"
                     "make_batch = lambda n: (torch.randn(n, 4).double(), torch.randn(n, 2).double())\n",
                     encoding="utf-8")
    done, _ = _report(tmp_path, model, "--device", "emulated-dml", "--steps", "1")
    assert done.returncode == 4
    assert "moving the model to the device" not in done.stderr and "float64" in done.stderr
    assert "at aten::addmm, in Linear" in done.stderr, done.stderr


def test_float64_passes_on_an_adapter_that_has_it(tmp_path):
    model = tmp_path / "typed_model.py"
    model.write_text(DTYPE_MODEL.format(dtype="torch.float64"), encoding="utf-8")
    done, session = _report(tmp_path, model, "--device", "emulated-dml", "--steps", "1",
                            env={"DMLPROF_EMULATED_FLOAT64": "1"})
    assert done.returncode == 0, done.stderr
    assert any("float64" in dtypes for dtypes in session.ops["dtypes"])


def test_emulated_scan_after_a_cpu_backward_in_the_same_process_and_a_clean_exit(tmp_path):
    program = tmp_path / "after_cpu.py"
    program.write_text(textwrap.dedent(f"""
        import torch, dmlprof
        w = torch.randn(3, requires_grad=True)
        (w * 2).sum().backward()          # the autograd engine starts with no device queues
        session = dmlprof.scan({str(FIXTURES.parent.parent / 'models' / 'lenet5.py')!r}, "emulated-dml",
                               steps=1, profiler=False)
        print("calls", len(session.ops))
        """), encoding="utf-8")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "calls" in done.stdout
    assert "terminate called" not in done.stderr and "INTERNAL ASSERT" not in done.stderr


def test_tensor_constructors_copy_to_the_device_and_are_reported_as_such(emulated_dml_backend):
    import torch

    import dmlprof

    with dmlprof.profile(backend=emulated_dml_backend, profiler=False) as run:
        torch.tensor([1.0, 2.0, 3.0], device=emulated_dml_backend.device())  # a CPU tensor copied inside C++
        torch.tensor([1.0, 2.0])  # stays on the CPU
    ops = run.session.ops
    lifts = ops[ops["op"] == "aten::lift_fresh"]
    assert list(lifts["transfer"]) == ["h2d", ""] and list(lifts["bytes_moved"]) == [12, 0]
