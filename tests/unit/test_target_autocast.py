"""``torch.autocast`` under ``--target mps`` / ``--target xpu`` (re-probe 16's 25 and 26): the target's own
autocast, cast on the stand-in, not DirectML's refusal (``--target dml`` keeps it: test_predict.py)."""
from __future__ import annotations


import pytest
import torch

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)


def _autocast_model(write_model, device_type: str, dtype: str = "float16") -> str:
    """A step whose forward runs under autocast and fails unless its linear layer ran in ``dtype``."""
    return write_model(f"""
        with torch.autocast(device_type={device_type}, dtype=torch.{dtype}):
            h = torch.relu(self.fc(x))
            if h.dtype != torch.{dtype}:
                raise ValueError(f"autocast cast nothing: {{h.dtype}}")
            s = torch.softmax(h, dim=1)  # an op autocast runs in float32
            if s.dtype != torch.float32:
                raise ValueError(f"softmax not in float32: {{s.dtype}}")
        return self.out(h.float())
    """, init="self.fc = nn.Linear(4, 4)\nself.out = nn.Linear(4, 4)", name="amp_net.py")


@pytest.mark.parametrize("target", ["mps", "xpu"])
def test_autocast_of_the_tensors_device_type_casts_under_the_target(linear_model_file, target):
    session = predict_scan(_autocast_model(linear_model_file, "x.device.type"), target=target)
    assert session.meta.device_failure is None


@pytest.mark.parametrize("target, dtype", [("mps", "float16"), ("xpu", "bfloat16")])
def test_autocast_named_by_the_target_casts_on_the_stand_in_and_is_restored(linear_model_file, target, dtype):
    original = torch.amp.autocast_mode.autocast.__init__
    session = predict_scan(_autocast_model(linear_model_file, repr(target), dtype), target=target)
    assert session.meta.device_failure is None
    assert torch.amp.autocast_mode.autocast.__init__ is original


def test_directml_still_refuses_autocast_as_torch_directml_registers_no_autocast_kernels(linear_model_file):
    from dmlprof.runner import ScanStopped

    with pytest.raises(ScanStopped) as stopped:
        predict_scan(_autocast_model(linear_model_file, "x.device.type"), target="dml")
    assert "registers no autocast kernels" in str(stopped.value)
