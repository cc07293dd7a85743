"""Device-only ops torch has no CPU or Meta kernel for (dmlprof/predict/references.py): MPS's ``max_pool2d``
keeps no indices and its backward is ``max_pool2d_backward``, which only MPS registers. ``--target mps`` of any
model with max pooling (models/resnet18.py) ended "step 1 raised NotImplementedError: aten::max_pool2d_backward".
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dmlprof.predict import predict_scan
from dmlprof.predict.references import max_pool2d_backward

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
