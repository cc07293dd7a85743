"""What the stand-ins of DirectML (the emulated device, the prediction's device) make a program print is what the
real backend does: a warning the CPU kernel behind a stand-in's kernel raises about its own intermediate work is
not the user's (issue 33's note: ``F.mse_loss`` printed torch's "output ... was resized" warning on both)."""
from __future__ import annotations

import textwrap
import warnings

import pytest

pytestmark = pytest.mark.live  # the emulated device's C++ kernels build against torch 2.4.1 too

RESIZED = "was resized since it had shape"


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_reduced_loss_on_the_emulated_device_warns_of_nothing_and_equals_the_cpus(emulated_dml_backend, reduction):
    import torch
    import torch.nn.functional as F

    device = emulated_dml_backend.device()
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on_device = x.to(device).requires_grad_()
        loss = F.mse_loss(on_device, y.to(device), reduction=reduction)
        loss.backward()
    assert [str(w.message) for w in caught if RESIZED in str(w.message)] == []
    on_cpu = x.clone().requires_grad_()
    expected = F.mse_loss(on_cpu, y, reduction=reduction)
    expected.backward()
    assert loss.shape == expected.shape and torch.equal(loss.cpu(), expected.detach())
    assert torch.equal(on_device.grad.cpu(), on_cpu.grad)


def test_an_out_tensor_of_the_wrong_shape_is_still_resized_with_torchs_warning(emulated_dml_backend):
    # torch's semantics, kept as they were: only the kernel's own intermediate resize is silenced. (Real
    # torch-directml 0.2.5 neither resizes nor warns here: out stays [2], holding two of the 12 values; measured
    # on realdml, torch 2.4.1. A wrong result the stand-ins do not model.)
    import torch

    device = emulated_dml_backend.device()
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    out = torch.zeros(2, device=device)
    with pytest.warns(UserWarning, match=RESIZED):
        torch._C._nn.mse_loss(x.to(device), y.to(device), 0, out=out)
    assert out.shape == (4, 3) and torch.equal(out.cpu(), (x - y) ** 2)


def _model(tmp_path, forward: str, loss: str = "F.mse_loss(output, target)"):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent("""
        import torch
        from torch import nn
        from torch.nn import functional as F
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(8, 3)
            def forward(self, x):
                %s
        def build_model():
            return Net()
        def make_batch(batch_size):
            return torch.randn(batch_size, 8), torch.randn(batch_size, 3)
        def loss_fn(output, target):
            return %s
        """) % (forward, loss), encoding="utf-8")
    return path


@pytest.mark.filterwarnings("error::UserWarning")
def test_a_prediction_of_a_model_with_mse_loss_warns_of_nothing(tmp_path):
    from dmlprof.predict import predict_scan

    session = predict_scan(_model(tmp_path, "return self.lin(x)"), batch_size=2)
    assert any("mse_loss" in op for op in session.ops["op"])


def test_a_prediction_still_resizes_an_out_of_the_wrong_shape_with_torchs_warning(tmp_path):
    from dmlprof.predict import predict_scan

    forward = "out = torch.zeros(2, device=x.device); torch.mul(x[:, :3], 2, out=out); return self.lin(x) + out"
    with pytest.warns(UserWarning, match=RESIZED):
        session = predict_scan(_model(tmp_path, forward, "output.sum()"), batch_size=2)
    assert "aten::mul.out" in set(session.ops["op"])
