"""dmlprof on the real torch-directml: the live path, and the prediction and emulation judged by it.

GIVEN torch-directml 0.2.5 itself (its native module and the DirectML runtime) on realdml
WHEN  a model runs under ``dmlprof scan --device dml``, and again under ``--target dml`` and
      ``--device emulated-dml`` (each in a process of its own)
THEN  the three agree call for call (op, verdict, fallback ops per step), a call DirectML refuses
      stops all three at the same op, and a call that would end torch-directml's process leaves a
      report, one error line and the partial session instead.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.realdml, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

FIXTURES = REPO / "tests" / "fixtures"
MODELS = sorted(p for p in (REPO / "models").glob("*.py") if not p.name.startswith("_"))
STEPS = ("--warmup", "1", "--steps", "1")
#: batch size of the model files here: DirectML on lavapipe runs ~10x slower than the CPU, and ViT-Tiny's
#: step at its own batch size takes minutes; which calls a step makes does not depend on it
SMALL_BATCH = ("--batch-size", "2")
#: model files whose step takes many minutes on lavapipe, scanned as a fixture that builds the same model on smaller
#: inputs (the same calls, a fraction of the work)
SMALLER_INPUTS = {"vit_tiny": FIXTURES / "vit_tiny_32px.py"}


def _same_calls(real, other, label: str) -> None:
    assert real.session is not None, f"the real scan saved no session: {real.describe()}"
    assert other.session is not None, f"the {label} saved no session: {other.describe()}"
    only_real, only_other = real.calls() - other.calls(), other.calls() - real.calls()
    assert not only_real and not only_other, (
        f"real DirectML and the {label} differ: only real {sorted(only_real.items())[:8]}; "
        f"only {label} {sorted(only_other.items())[:8]}")


def _stopped_at(result) -> dict:
    failure = result.meta.get("device_failure")
    assert failure, f"the run did not stop on a call DirectML refuses: {result.describe()}"
    return failure


def test_a_scan_on_real_directml_needs_no_wrapper_and_says_what_its_device_and_times_are(scan):
    real = scan(REPO / "models" / "groupnorm_net.py", "--device", "dml", *STEPS)
    assert real.returncode == 0, real.describe()
    assert "lavapipe" in real.meta["device_emulation"]
    assert "never a GPU's" in real.meta["timing"] and "lavapipe" in real.stdout
    assert real.meta["device_float64"] is False  # this stack's adapter has no float64
    predicted = scan(REPO / "models" / "groupnorm_net.py", "--target", "dml", *STEPS)
    _same_calls(real, predicted, "prediction")


@pytest.mark.parametrize("model", MODELS, ids=[p.stem for p in MODELS])
def test_every_model_file_runs_on_real_directml_as_predicted(scan, model):
    model = SMALLER_INPUTS.get(model.stem, model)
    real = scan(model, "--device", "dml", *STEPS, *SMALL_BATCH, "--no-profiler")
    if real.meta.get("device_failure"):
        # a model DirectML refuses: the other paths stop at the same call
        failure = real.meta["device_failure"]
        for other in (scan(model, "--target", "dml", *STEPS, *SMALL_BATCH),
                      scan(model, "--device", "emulated-dml", *STEPS, *SMALL_BATCH)):
            assert _stopped_at(other)["op"] == failure["op"]
        return
    assert real.returncode == 0, real.describe()
    # the emulated device equals the prediction call for call (tests/integration/test_predict_vs_emulated.py,
    # lane 2): equal to the prediction here, it equals real DirectML too
    _same_calls(real, scan(model, "--target", "dml", *STEPS, *SMALL_BATCH), "prediction")


def test_a_model_that_ends_torch_directmls_process_leaves_a_report_an_error_line_and_its_session(scan):
    real = scan(FIXTURES / "fnet_fft.py", "--device", "dml")
    assert real.returncode == 4, real.describe()
    failure = _stopped_at(real)
    assert failure["kind"] == "aborts" and "ComplexFloat" in failure["message"]
    assert failure["source"].endswith("fnet_fft.py:19")
    assert "Fails on DirectML: " + failure["op"] in real.stdout  # the report, led by the failing call
    assert real.stderr.count("\n") == 1 and "complex tensors abort torch-directml" in real.stderr
    assert real.meta["partial"] is True
    for other in (scan(FIXTURES / "fnet_fft.py", "--target", "dml"),
                  scan(FIXTURES / "fnet_fft.py", "--device", "emulated-dml")):
        assert other.returncode == 4, other.describe()
        assert _stopped_at(other)["op"] == failure["op"] and _stopped_at(other)["kind"] == "aborts"


def test_a_call_directml_refuses_stops_every_path_at_that_call(scan):
    real = scan(FIXTURES / "one_hot_loss.py", "--device", "dml")
    failure = _stopped_at(real)
    assert failure["op"].startswith("aten::scatter") and failure["kind"] == "raises"
    for other in (scan(FIXTURES / "one_hot_loss.py", "--target", "dml"),
                  scan(FIXTURES / "one_hot_loss.py", "--device", "emulated-dml")):
        assert _stopped_at(other)["op"] == failure["op"]
        assert _stopped_at(other)["message"] == failure["message"]


FLOAT_SCALAR_LOSS = '''
import torch
from torch import nn

BATCH_SIZE = 4


def build_model():
    torch.manual_seed(0)
    return nn.Linear(8, 4)


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.rand(batch_size, 4)


def loss_fn(output, target):
    overlap = torch.sigmoid(output) * target
    return (1.0 - overlap).mean()  # a YOLO-style 1 - IoU
'''


def test_what_fails_follows_the_adapters_float64_in_reality_and_in_the_prediction(scan, tmp_path):
    model = tmp_path / "float_scalar_loss.py"
    model.write_text(FLOAT_SCALAR_LOSS, encoding="utf-8")
    without = scan(model, "--device", "dml", *STEPS)
    assert _stopped_at(without)["op"] == "aten::rsub.Scalar"
    predicted_without = scan(model, "--target", "dml", *STEPS)
    assert _stopped_at(predicted_without)["op"] == "aten::rsub.Scalar"
    assert any("--adapter float64" in note for note in predicted_without.meta["notes"])
    with_float64 = scan(model, "--device", "dml", *STEPS, env={"VKD3D_REALDML_FORCE_FP64": "1"})
    assert with_float64.returncode == 0 and with_float64.meta["device_float64"] is True, with_float64.describe()
    _same_calls(with_float64, scan(model, "--target", "dml", "--adapter", "float64", *STEPS), "prediction")


#: one zoo entry per family, cheap on lavapipe (the whole zoo on real DirectML is tools/realdml/run_zoo.py's,
#: committed and compared with the prediction in lane 2): a transformer, a fallback-heavy vision model, a
#: script written for DirectML, and a model DirectML refuses
ZOO = REPO / "tests" / "zoo"
ZOO_FAMILIES = [ZOO / "models" / "bert_mlm.py", ZOO / "models" / "spatial_transformer.py",
                ZOO / "scripts" / "directml_train.py", ZOO / "models" / "moe.py"]


@pytest.mark.parametrize("entry", ZOO_FAMILIES, ids=[p.stem for p in ZOO_FAMILIES])
def test_a_zoo_entry_of_each_family_runs_on_real_directml_as_predicted(scan, entry):
    window = ("--warmup", "1", "--steps", "2")
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(ZOO)]), "HF_HUB_OFFLINE": "1"}
    real = scan(entry, "--device", "dml", *window, "--no-profiler", env=env)
    predicted = scan(entry, "--target", "dml", *window, env=env)
    if real.meta.get("device_failure"):
        assert _stopped_at(predicted)["op"] == real.meta["device_failure"]["op"]
        return
    assert real.returncode == 0, real.describe()
    _same_calls(real, predicted, "prediction")
