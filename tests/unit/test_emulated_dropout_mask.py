"""The emulated DirectML device returns native_dropout's mask in the input's dtype, as torch-directml does (re-probe
17, 31): it kept the CPU's bool mask, so a script indexing with the mask (``x[mask]``) passed ``check --target dml``
and raised IndexError on DirectML. The prediction's stand-in made the mask float already (re-probe 16, 15): both read
one definition (dmlprof.directml.output_dtypes). Measured on realdml: tests/realdml/test_dropout_mask_on_real_directml.py.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dmlprof.directml.output_dtypes import OUTPUT_IN_INPUT_DTYPE
from dmlprof.predict.special_kernels import DIRECTML_DTYPES

pytestmark = pytest.mark.live  # torch-version-sensitive: runs on torch 2.4.1 too


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("train", [True, False])
def test_the_mask_is_in_the_inputs_dtype_with_zeros_and_ones(emulated_dml_backend, dtype, train):
    x = torch.randn(4, 8).to(dtype).to(emulated_dml_backend.device())
    out, mask = torch.native_dropout(x, 0.5, train)
    assert mask.dtype == dtype and mask.device == x.device and mask.shape == x.shape
    values = set(mask.cpu().float().flatten().tolist())
    assert values <= {0.0, 1.0} and (values == {1.0} if not train else True)
    scale = 2.0 if train else 1.0
    assert torch.equal(out.cpu(), x.cpu() * mask.cpu() * scale)


def test_indexing_with_the_mask_raises_as_on_directml(emulated_dml_backend):
    x = torch.randn(4, 8, device=emulated_dml_backend.device())
    _, mask = torch.native_dropout(x, 0.5, True)
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[mask]


def test_dropout_and_its_gradient_are_the_cpus_with_the_same_seed(emulated_dml_backend):
    """F.dropout and nn.Dropout take native_dropout's output only; their backward takes the float mask."""
    device = emulated_dml_backend.device()
    base = torch.randn(6, 10)  # never requires grad: each side takes a leaf of its own
    results = []
    for where in ("cpu", device):
        torch.manual_seed(7)  # the device's random calls are the CPU generator's
        x = base.to(where).detach().requires_grad_()
        y = F.dropout(x, 0.3, True)
        z = torch.nn.Dropout(0.3)(x)
        (y * 2 + z).sum().backward()
        results.append((y.detach().cpu(), z.detach().cpu(), x.grad.cpu(), type(y.grad_fn).__name__))
    (y_cpu, z_cpu, g_cpu, _), (y_dev, z_dev, g_dev, grad_fn) = results
    assert grad_fn == "NativeDropoutBackward0"  # the fused path: a PrivateUse1 tensor takes native_dropout
    assert torch.equal(y_dev, y_cpu) and torch.equal(z_dev, z_cpu) and torch.equal(g_dev, g_cpu)


def test_the_backward_takes_the_float_mask(emulated_dml_backend):
    device = emulated_dml_backend.device()
    grad = torch.ones(3, 5, device=device)
    _, mask = torch.native_dropout(torch.randn(3, 5, device=device), 0.5, True)
    got = torch.ops.aten.native_dropout_backward(grad, mask, 2.0)
    assert got.dtype == torch.float32 and torch.equal(got.cpu(), mask.cpu() * 2.0)


def test_the_stand_in_and_the_emulated_device_read_one_definition():
    assert set(DIRECTML_DTYPES) == set(OUTPUT_IN_INPUT_DTYPE) == {"aten::native_dropout"}
