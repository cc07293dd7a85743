"""Device-only ops torch has no CPU or Meta kernel for (dmlprof/predict/references.py): MPS's ``max_pool2d``
keeps no indices and its backward is ``max_pool2d_backward``, which only MPS registers. ``--target mps`` of any
model with max pooling (models/resnet18.py) ended "step 1 raised NotImplementedError: aten::max_pool2d_backward".
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dmlprof.predict import predict_scan
from dmlprof.predict.references import linear_backward, max_pool2d_backward

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_the_reference_gives_autograds_max_pool_gradient(ceil_mode):
    x = torch.randn(2, 3, 9, 9, requires_grad=True)
    out = F.max_pool2d(x, 3, 2, 1, 1, ceil_mode)
    grad = torch.randn_like(out)
    out.backward(grad)
    assert torch.equal(max_pool2d_backward(grad, x.detach(), [3, 3], [2, 2], [1, 1], [1, 1], ceil_mode), x.grad)


def test_a_max_pooling_model_is_predicted_on_mps_through_its_backward(linear_model_file):
    model = linear_model_file("return torch.nn.functional.max_pool2d(self.fc(x)[:, None, None], 2, 1, 1)[:, 0, :, :4].sum(1)")
    session = predict_scan(model, target="mps")
    ops = session.ops
    backward = ops[ops["op"] == "aten::max_pool2d_backward"]
    assert len(backward) == 1 and backward["output_devices"].str.contains("privateuseone").all()
    assert session.meta.prediction.guess is None  # its gradient was computed, not made up


def test_the_reference_gives_autograds_linear_gradients():
    x, weight, bias = (torch.randn(2, 3, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True),
                       torch.randn(4, requires_grad=True))
    out = F.linear(x, weight, bias)
    grad = torch.randn_like(out)
    out.backward(grad)
    found = linear_backward(x.detach(), grad, weight.detach(), [True, True, True])
    for mine, autograds in zip(found, (x.grad, weight.grad, bias.grad)):
        assert torch.allclose(mine, autograds, atol=1e-6)


def test_an_mps_linear_models_weights_hold_values_after_its_step(linear_model_file, capsys):
    """MPS's ``linear`` is a kernel of its own, whose backward (``linear_backward``) has no CPU kernel: every MPS
    model's weights held made-up values from its second step (docs/probe20/deepcopy2_model.py printed "row0 1.0 w
    1.0"; XPU, DirectML and the CPU print the updated weights). The values reference also never ran (its
    ``out=`` lookup read a schema a Python function lacks)."""
    seeded = "def make_batch(batch_size):\n    torch.manual_seed(1)\n    return torch.randn(batch_size, 4), torch.randn(batch_size, 4)\n"
    model = linear_model_file('print("w", f"{float(self.fc.weight.detach().sum()):.5f}", flush=True)\nreturn self.fc(x)',
                              init="torch.manual_seed(0)\nself.fc = nn.Linear(4, 4)", extra=seeded)
    session = predict_scan(model, target="mps", steps=2)
    assert session.meta.prediction.guess is None
    predicted = [line for line in capsys.readouterr().out.splitlines() if line.startswith("w ")]
    on_xpu = predict_scan(model, target="xpu", steps=2)
    assert on_xpu.meta.prediction.guess is None
    xpus = [line for line in capsys.readouterr().out.splitlines() if line.startswith("w ")]
    assert len(predicted) >= 2 and predicted == xpus and len(set(predicted)) > 1  # the step changed them
