"""Model code branching on ``x.device.type`` under ``--target mps`` / ``--target xpu`` (re-probe 16's 17): the
stand-in's tensors read "privateuseone", so a failure predicted there says the branch may differ on the device."""
from __future__ import annotations

import textwrap

import pytest

from dmlprof.predict import predict_scan
from dmlprof.runner import ScanStopped

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)


def _model(tmp_path, dtype_line: str) -> str:
    path = tmp_path / "unet.py"
    path.write_text(textwrap.dedent(f"""
        import torch
        from torch import nn

        BATCH_SIZE = 2

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                {dtype_line}
                t = torch.tensor([10], dtype=dtype, device=x.device)
                return self.fc(x) + t.float()

        def build_model():
            return Net()

        def make_batch(batch_size):
            return torch.randn(batch_size, 4), torch.randn(batch_size, 4)

        def loss_fn(out, batch):
            return ((out - batch[1]) ** 2).mean()
    """))
    return str(path)


def test_a_failure_under_a_device_type_branch_says_the_model_saw_privateuseone(tmp_path):
    model = _model(tmp_path, 'dtype = torch.float32 if x.device.type == "mps" else torch.float64')
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target="mps")
    said = str(stopped.value)
    assert "unet.py:12" in said and '"privateuseone"' in said and "never runs" in said
    assert any("unet.py:12" in note and "privateuseone" in note for note in stopped.value.session.meta.notes)


def test_a_failure_in_code_that_asks_no_device_type_has_no_such_note(tmp_path):
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(_model(tmp_path, "dtype = torch.float64"), target="mps")
    assert "privateuseone" not in str(stopped.value)
    assert not any("privateuseone" in note for note in stopped.value.session.meta.notes)
