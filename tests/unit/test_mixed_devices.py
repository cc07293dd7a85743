"""A CPU tensor beside device tensors (re-probe 21, cases 15, 16, 23, 25, 26): torch-directml's kernels refuse most
such calls ("unbox expects Dml at::Tensor as inputs"), where the CPU kernels both stand-ins ran took them (a 0-d one as
a scalar), so ``check --target dml`` passed scripts that die on the device. Measured on realdml
(tools/mixed_device_survey.py); the rule: dmlprof/directml/mixed_devices.py."""
from __future__ import annotations

import textwrap

import pytest

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.live  # torch-version-sensitive: runs on torch 2.4.1 too

MODEL = """
import torch
from torch import nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.head, self.emb = nn.Linear(4, 6), nn.Linear(6, 3), nn.Embedding(6, 6)
        self.w, self.b = torch.ones(6), torch.zeros(6)  # plain attributes: Module.to leaves them on the CPU
        self.rm, self.rv, self.m = torch.zeros(6), torch.ones(6), torch.eye(6)
    def forward(self, x):
        h = self.lin(x)
        h = CALL  # the call
        return self.head(h)

def build_model():
    return Net()

def make_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randint(0, 3, (batch_size,))
"""

#: each raises on realdml at the forward's call (docs/probe21.md: 15, 23, 25, 26), in this op
REFUSED_IN_FORWARD = {
    "cross_entropy, CPU targets": ("h + 0 * F.cross_entropy(h, torch.zeros(h.shape[0], dtype=torch.long))",
                                   "aten::nll_loss_forward"),
    "cat with a CPU tensor": ("torch.cat([h, torch.zeros(h.shape[0], 1)], 1)[:, :6]", "aten::cat"),
    "embedding, CPU indices": ("h + self.emb(torch.zeros(h.shape[0], dtype=torch.long))", "aten::embedding"),
    "embedding, CPU weight": ("h + F.embedding(torch.zeros(h.shape[0], dtype=torch.long, device=h.device), "
                              "self.w.view(6, 1).expand(6, 6).contiguous())", "aten::embedding"),
    "gather, CPU index": ("h.gather(1, torch.zeros(h.shape[0], 6, dtype=torch.long))", "aten::gather"),
    "where, CPU other": ("torch.where(h > 0, h, self.b)", "aten::where.self"),
    "where, 0-d CPU other": ("torch.where(h > 0, h, torch.tensor(-0.5))", "aten::where.self"),
    "masked_fill, 0-d CPU value": ("h.masked_fill(h < 0, torch.tensor(-0.5))", "aten::masked_fill"),
    "batch_norm, CPU statistics": ("F.batch_norm(h, self.rm, self.rv, training=True)", "aten::native_batch_norm"),
    "instance_norm, CPU statistics": ("F.instance_norm(h.unsqueeze(-1).expand(-1, -1, 3), self.rm, self.rv, "
                                      "use_input_stats=True).mean(-1)", "aten::native_batch_norm"),
}

#: each runs on realdml (docs/probe21.md 15, 23, 26's controls; the survey)
RUNNING = {
    "mm with a CPU matrix": "h @ self.m",
    "index with CPU indices": "h[torch.arange(h.shape[0])]",
    "mul by a 0-d CPU tensor": "h * torch.tensor(2.0)",
    "a CPU tensor moved first": "h + self.b.to(h.device)",
    "copy_ from the CPU": "h * 1 + torch.zeros_like(h).copy_(self.b.expand(h.shape[0], 6))",
}


def _model(tmp_path, call: str):
    path = tmp_path / "mixed.py"
    path.write_text(MODEL.replace("CALL", call), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(REFUSED_IN_FORWARD))
def test_a_cpu_tensor_beside_device_tensors_fails_the_prediction_at_its_line(tmp_path, case):
    """``check --target dml`` passed each (the CPU kernel took the CPU tensor); realdml raises there."""
    from dmlprof.runner import ScanStopped

    call, op = REFUSED_IN_FORWARD[case]
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(_model(tmp_path, call), batch_size=2, steps=1, warmup=0)
    said = str(stopped.value)
    assert "a CPU tensor meets device tensors in one call" in said  # the known error: dml_cpu_tensor
    line = 1 + MODEL.splitlines().index("        h = CALL  # the call")
    assert f"(at {op}" in said and f"mixed.py:{line})" in said


def test_an_index_less_device_tensor_in_where_fails_as_on_the_emulated_device(tmp_path):
    """Re-probe 21, 25: ``torch.zeros(6, device=h.device.type)`` is on "privateuseone" (no index) on torch-directml,
    and where refuses it beside "privateuseone:0"; the emulated device refused it, the prediction passed."""
    from dmlprof.runner import ScanStopped

    with pytest.raises(ScanStopped) as stopped:
        predict_scan(_model(tmp_path, "torch.where(h > 0, h, torch.zeros(6, device=h.device.type))"), batch_size=2,
                     steps=1, warmup=0)
    assert "x and y are on privateuseone:0 and privateuseone respectively" in str(stopped.value)


@pytest.mark.parametrize("case", sorted(RUNNING))
def test_a_cpu_tensor_torch_directml_takes_is_taken(tmp_path, case):
    session = predict_scan(_model(tmp_path, RUNNING[case]), batch_size=2, steps=1, warmup=0)
    assert not session.meta.to_dict().get("partial"), session.meta.to_dict().get("partial_reason")


def test_a_cpu_layer_norm_weight_is_blamed_on_the_cpu_tensor_not_a_frozen_weight(tmp_path):
    """Re-probe 21, 16: LayerNorm's rule for a frozen weight (DXGI_ERROR_DEVICE_REMOVED) answered first."""
    from dmlprof.runner import ScanStopped

    with pytest.raises(ScanStopped) as stopped:
        predict_scan(_model(tmp_path, "F.layer_norm(h, (6,), self.w, self.b)"), batch_size=2, steps=1, warmup=0)
    said = str(stopped.value)
    assert "a CPU tensor meets device tensors in one call" in said
    assert "DEVICE_REMOVED" not in said


def test_the_known_error_names_the_cpu_tensor_and_the_fix():
    from dmlprof.backends.errors import explain_device_error
    from dmlprof.directml.mixed_devices import UNBOX_MESSAGE, WHERE_MESSAGE

    for text in (UNBOX_MESSAGE, WHERE_MESSAGE.format("privateuseone:0", "privateuseone:0", "cpu")):
        known = explain_device_error(RuntimeError(text))
        assert known is not None and known.key == "dml_cpu_tensor", text


@pytest.mark.own_process
@pytest.mark.parametrize("target", ["xpu", "mps"])
def test_other_targets_refuse_a_cpu_tensor_as_cuda_does_and_take_a_0d_scalar(tmp_path, target):
    """Real XPU/MPS kernels check devices as CUDA's (read, not measured): a CPU target of cross_entropy fails;
    a 0-d CPU tensor in a TensorIterator op (``mul``) is a scalar there."""
    from dmlprof.runner import ScanStopped

    call, _ = REFUSED_IN_FORWARD["cross_entropy, CPU targets"]
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(_model(tmp_path, call), batch_size=2, steps=1, warmup=0, target=target)
    assert f"{target}:0 and cpu" in str(stopped.value)
    session = predict_scan(_model(tmp_path, RUNNING["mul by a 0-d CPU tensor"]), batch_size=2, steps=1, warmup=0,
                           target=target)
    assert not session.meta.to_dict().get("partial")


def test_the_rule_reads_the_measurement_and_judges_unmeasured_overloads_by_their_siblings():
    from dmlprof.directml.mixed_devices import ACCEPT, UNBOX, verdict_for

    assert verdict_for("aten::mm", "mat2", "nd") == ACCEPT  # measured: h @ cpu_matrix runs
    assert verdict_for("aten::mul.Tensor", "other", "0d") == ACCEPT  # TensorIterator's scalar
    assert verdict_for("aten::mul.out", "other", "0d") == ACCEPT  # a sibling's measurement
    assert verdict_for("aten::embedding", "indices", "nd") == UNBOX
    assert verdict_for("aten::never_measured_op", "self", "nd") == UNBOX  # torch-directml's kernel: the assert
    assert verdict_for("aten::never_measured_op", "self", "nd", native=False) == ACCEPT  # its CPU fallback


EMULATED = textwrap.dedent("""
    import sys, torch
    import torch.nn.functional as F
    from dmlprof import testing
    d = testing.device()
    h = torch.randn(8, 6).to(d)
    calls = {
        "cross_entropy": lambda: F.cross_entropy(h, torch.zeros(8, dtype=torch.long)),
        "cat": lambda: torch.cat([h, torch.zeros(8, 1)], 1),
        "where0d": lambda: torch.where(h > 0, h, torch.tensor(-0.5)),
        "masked_fill0d": lambda: h.masked_fill(h < 0, torch.tensor(-0.5)),
        "batch_norm": lambda: F.batch_norm(h, torch.zeros(6), torch.ones(6), training=True),
        "mm": lambda: h @ torch.eye(6), "index": lambda: h[torch.arange(8)], "mul0d": lambda: h * torch.tensor(2.0),
        "copy_": lambda: h.clone().copy_(torch.zeros(8, 6)), "to": lambda: torch.zeros(3).to(d),
    }
    for name, call in calls.items():
        try:
            call()
            print(name, "ran")
        except RuntimeError as exc:
            print(name, "refused:", str(exc).splitlines()[0][-60:])
""")


def test_the_emulated_device_refuses_and_takes_as_the_prediction_does():
    import subprocess
    import sys

    from dmlprof import testing

    problem = testing.build_problem()
    if problem:  # as conftest's emulated_dml_backend: the device must build where the tests run
        pytest.fail(f"the emulated DML device must build here: {problem}")
    done = subprocess.run([sys.executable, "-c", EMULATED], capture_output=True, text=True, timeout=600)
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert said.keys() == {"cross_entropy", "cat", "where0d", "masked_fill0d", "batch_norm", "mm", "index", "mul0d",
                           "copy_", "to"}, done.stderr[-2000:]
    for refused in ("cross_entropy", "cat", "masked_fill0d"):
        assert said[refused].startswith("refused:") and "unbox expects Dml at::Tensor as inputs" in said[refused]
    assert "privateuseone:0 and cpu" in said["where0d"] and "privateuseone:0 and cpu" in said["batch_norm"]
    for taken in ("mm", "index", "mul0d", "copy_", "to"):
        assert said[taken] == "ran", (taken, said[taken])


def test_the_survey_record_keeps_a_call_that_ended_the_process_as_an_abort(tmp_path):
    """tools/mixed_device_survey.py: torch-directml ends the process on some calls; the next run reads its record."""
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("survey", Path(__file__).parents[2] / "tools" / "mixed_device_survey.py")
    survey = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(survey)
    record = tmp_path / "s.jsonl"
    entries = [{"start": "mm"}, {"pending": {"func": "aten.mm.default", "arg": "mat2", "kind": "nd"}},
               {"func": "aten.mm.default", "arg": "mat2", "kind": "nd", "verdict": {"verdict": "accept"}},
               {"done": "mm"}, {"start": "bmm"}, {"pending": {"func": "aten.bmm.default", "arg": "mat2", "kind": "nd"}}]
    record.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    found, done = survey.Log(record).replay()
    assert done == {"mm"}  # bmm again in the next run, past the call that ended it
    assert found["aten.bmm.default"]["mat2"]["nd"]["aborts"]
    namespace: dict = {}
    exec(survey.module_text(survey.summary(survey.Log(record))), namespace)
    assert namespace["MEASURED"] == {"aten::bmm": {"mat2": {"nd": "aborts"}}, "aten::mm": {"mat2": {"nd": "accept"}}}
