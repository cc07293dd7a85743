"""Model code branching on ``x.device.type`` under ``--target mps`` / ``--target xpu`` (re-probe 16's 17): the
stand-in's tensors read "privateuseone", so a failure predicted there says the branch may differ on the device."""
from __future__ import annotations


import pytest

from dmlprof.predict import predict_scan
from dmlprof.runner import ScanStopped

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)


def _model(write_model, dtype_line: str) -> str:
    return write_model(f"""
        {dtype_line}
        t = torch.tensor([10], dtype=dtype, device=x.device)
        return self.fc(x) + t.float()
    """, name="unet.py")


def test_a_failure_under_a_device_type_branch_says_the_model_saw_privateuseone(linear_model_file):
    model = _model(linear_model_file, 'dtype = torch.float32 if x.device.type == "mps" else torch.float64')
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target="mps")
    said = str(stopped.value)
    assert "unet.py:12" in said and '"privateuseone"' in said and "never runs" in said
    assert any("unet.py:12" in note and "privateuseone" in note for note in stopped.value.session.meta.notes)


def test_a_failure_in_code_that_asks_no_device_type_has_no_such_note(linear_model_file):
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(_model(linear_model_file, "dtype = torch.float64"), target="mps")
    assert "privateuseone" not in str(stopped.value)
    assert not any("privateuseone" in note for note in stopped.value.session.meta.notes)
