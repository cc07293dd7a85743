"""``scan --verify`` on the emulated DirectML device, against faults injected on purpose.

GIVEN the emulated device told to corrupt one op's output or drop one op's
in-place write, WHEN a model is scanned with --verify, THEN the report names
exactly that op (and, for a dropped optimizer write, the parameters it lost);
with no fault, every model in models/ verifies clean.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted(p for p in (ROOT / "models").glob("*.py") if not p.name.startswith("_"))
LENET = ROOT / "models" / "lenet5.py"

# A small model: an in-place ReLU in forward, the optimizer from the test.
SMALL_MODEL = '''
import torch
from torch import nn

def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True), nn.Linear(16, 4))

def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 8, generator=g), torch.randint(0, 4, (batch_size,), generator=g)

def make_optimizer(params):
    return {factory}
'''
SMALL_PARAMETERS = {"Sequential.0.weight", "Sequential.0.bias", "Sequential.2.weight", "Sequential.2.bias"}


@pytest.fixture
def backend(emulated_dml_backend):
    return emulated_dml_backend


@contextmanager
def fault(kind, op):
    from dmlprof import testing

    testing.set_fault(kind, op)
    try:
        yield testing
    finally:
        testing.clear_fault()


def verified_scan(path, backend, **kwargs):
    from dmlprof.runner import ScanStopped, scan

    options = dict(device="emulated-dml", steps=1, warmup=0, batch_size=2, backend=backend, verify=True)
    options.update(kwargs)
    try:
        return scan(path, **options)
    except ScanStopped as stopped:
        return stopped.session


def small_model(tmp_path, factory) -> Path:
    path = tmp_path / "small.py"
    path.write_text(SMALL_MODEL.format(factory=factory), encoding="utf-8")
    return path


def divergent_ops(session) -> set:
    return {d["op"] for d in session.extras["verify"]["divergent"]}


@pytest.mark.parametrize("op, phase", [("aten::addmm", "forward"), ("aten::convolution_backward", "backward")])
def test_corrupted_op_is_named(op, phase, backend):
    with fault("corrupt", op) as testing:
        session = verified_scan(LENET, backend)
        assert testing.fault_hits() > 0, "the fault never fired: the test would prove nothing"
    verify = session.extras["verify"]
    assert divergent_ops(session) == {op}, verify["divergent"]
    for record in verify["divergent"]:
        assert record["phase"] == phase
        assert record["module"].startswith("LeNet5."), record
        assert record["max_abs_error"] >= 1.0  # the fault adds at least 1
        assert record["input_shapes"] and record["output_shape"] and record["output_dtype"] == "float32"
    assert verify["lost_updates"] == []


def test_dropped_inplace_write_in_forward_is_named(backend, tmp_path):
    path = small_model(tmp_path, "torch.optim.SGD(params, lr=0.1)")
    with fault("drop_write", "aten::relu_") as testing:
        session = verified_scan(path, backend)
        assert testing.fault_hits() > 0
    records = session.extras["verify"]["divergent"]
    assert divergent_ops(session) == {"aten::relu_"}, records
    assert records[0]["what"].startswith("in-place write to self")
    assert records[0]["module"] == "Sequential.1"


@pytest.mark.parametrize("factory, op", [
    ("torch.optim.SGD(params, lr=0.1)", "aten::_foreach_add_.List"),          # foreach: the default on the device
    ("torch.optim.SGD(params, lr=0.1, foreach=False)", "aten::add_.Tensor"),  # one add_ per parameter
])
def test_dropped_optimizer_write_names_the_parameters(factory, op, backend, tmp_path):
    path = small_model(tmp_path, factory)
    with fault("drop_write", op) as testing:
        session = verified_scan(path, backend)
        assert testing.fault_hits() > 0
    verify = session.extras["verify"]
    assert {r["parameter"] for r in verify["lost_updates"]} == SMALL_PARAMETERS
    assert all(r["optimizer"] == "SGD" and r["max_abs_grad"] > 0 for r in verify["lost_updates"])
    assert divergent_ops(session) == {op}
    assert {d["phase"] for d in verify["divergent"]} == {"optimizer"}


def test_cli_finds_a_fault_set_by_environment(tmp_path):
    report = tmp_path / "report.json"
    env = dict(os.environ, DMLPROF_EMULATED_FAULT="corrupt:aten::addmm")
    proc = subprocess.run(
        [sys.executable, "-m", "dmlprof", "scan", str(LENET), "--device", "emulated-dml", "--verify", "--steps", "1",
         "--warmup", "0", "--batch-size", "2", "--no-profiler", "--out", str(tmp_path), "--json", str(report)],
        capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600,
    )
    # wrong results fail the run (exit 5, docs/exit_codes.md) after the report and the files are written
    assert proc.returncode == 5, proc.stderr
    assert "diverged from the CPU" in proc.stdout
    error = [line for line in proc.stderr.splitlines() if line.startswith("dmlprof: error:")]
    assert len(error) == 1 and "diverged from the CPU" in error[0] and "session saved to" in error[0]
    assert "Traceback" not in proc.stderr
    data = json.loads(report.read_text(encoding="utf-8"))["verification"]
    assert [r["op"] for r in data["divergent_ops"]] == ["aten::addmm"] * len(data["divergent_ops"])
    assert data["divergent_ops"] and not data["clean"]
    assert {r["module"] for r in data["divergent_ops"]} <= {"LeNet5.classifier.1", "LeNet5.classifier.3",
                                                              "LeNet5.classifier.5"}


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_no_false_alarms_on_any_model(path, backend):
    from dmlprof import testing

    assert testing.current_fault() is None
    session = verified_scan(path, backend)
    verify = session.extras["verify"]
    assert verify["divergent"] == [] and verify["divergent_calls"] == 0
    assert verify["lost_updates"] == []
    assert verify["checked_calls"] > 0
    if session.meta.to_dict().get("partial"):
        # nn.LSTM's fused cell falls back and has no CPU kernel: the step fails, as on DirectML.
        assert verify["partial"] and verify["optimizer_steps"] == 0
    else:
        assert verify["optimizer_steps"] == 1 and verify["parameters_checked"] > 0
    from dmlprof.render.terminal import render_text

    assert "nothing diverged" in render_text(session)


SCRIPT = '''
import torch
from torch import nn

class Forgetful(torch.optim.SGD):
    """Never updates the last layer's bias: a lost write, whatever the device."""

    @torch.no_grad()
    def step(self, closure=None):
        bias = model[2].bias
        kept = bias.clone()
        super().step()
        bias.copy_(kept)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
optimizer = Forgetful(model.parameters(), lr=0.1)
for _ in range(2):
    loss = model(torch.randn(4, 6)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
'''


def test_script_mode_names_lost_updates_from_the_modules_seen(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "dmlprof", "scan", str(script), "--device", "cpu", "--verify", "--no-profiler",
         "--out", str(tmp_path), "--json", str(report)],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=600,
    )
    assert proc.returncode == 5, proc.stderr  # a lost update is a wrong result too
    data = json.loads(report.read_text(encoding="utf-8"))["verification"]
    assert [(r["parameter"], r["steps"]) for r in data["lost_updates"]] == [("Sequential.2.bias", 2)]
    assert data["divergent_ops"] == [] and data["optimizer_steps"] == 2
    assert "Lost updates" in proc.stdout and "Sequential.2.bias" in proc.stdout


@pytest.mark.parametrize("other", [["--target", "dml"], ["--replace"]])
def test_verify_refuses_what_it_cannot_check(other, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(LENET), "--verify", *other,
                           "--out", str(tmp_path)], capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert proc.returncode != 0
    assert proc.stderr.startswith("dmlprof: error: --verify") and "Traceback" not in proc.stderr


def test_fault_api_rejects_what_it_cannot_do(backend):
    from dmlprof import testing

    for kind, op, words in [("explode", "aten::addmm", "unknown fault kind"),
                            ("corrupt", "aten::no_such_op", "not an operator"),
                            ("corrupt", "addmm", "namespace"),
                            ("drop_write", "aten::addmm", "writes no argument in place")]:
        with pytest.raises(testing.EmulatedDeviceError, match=words):
            testing.set_fault(kind, op)
    assert testing.current_fault() is None
    with fault("corrupt", "aten::mul.Tensor") as t:
        assert t.current_fault() == ("corrupt", "aten::mul.Tensor")
    assert testing.current_fault() is None


def test_a_clean_verification_exits_0(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "dmlprof", "scan", str(LENET), "--device", "cpu", "--verify", "--steps", "1",
         "--warmup", "0", "--batch-size", "2", "--no-profiler", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Verification: nothing diverged" in proc.stdout
