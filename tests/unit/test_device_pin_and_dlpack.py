"""Pinning and DLPack of a device tensor, as torch-directml answers them (re-probe 22, case 10; measured on realdml:
``x.pin_memory()`` raises "cannot pin 'privateuseoneFloatType' only dense CPU tensors can be pinned",
``torch.utils.dlpack.to_dlpack(x)`` "Cannot access data pointer of Tensor that doesn't have storage"). Both ran under
dmlprof: ``--from cuda`` skips pinning by handing the tensor back, and DLPack read the emulated host memory."""
from __future__ import annotations

import pytest
import torch

from dmlprof.directml import no_storage

DEVICE = "meta"  # standing for the device's tensors: no_storage judges by device type


@pytest.fixture
def reads_refused():
    no_storage.install(DEVICE)
    try:
        yield
    finally:
        no_storage.remove()


def test_to_dlpack_of_a_device_tensor_raises_directmls_words_and_a_cpu_one_still_converts(reads_refused):
    x = torch.empty(4, 3, device=DEVICE)
    for convert in (torch.utils.dlpack.to_dlpack, torch.to_dlpack, lambda t: t.__dlpack__()):
        with pytest.raises(RuntimeError, match="Cannot access data pointer of Tensor that doesn't have storage"):
            convert(x)
    cpu = torch.arange(3.0)
    assert torch.equal(torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(cpu)), cpu)


def test_to_dlpack_is_torchs_own_again_once_removed():
    no_storage.install(DEVICE)
    no_storage.remove()
    assert torch.utils.dlpack.to_dlpack is no_storage.TO_DLPACK and torch.to_dlpack is no_storage.TO_DLPACK


def test_pinning_under_from_cuda_skips_a_cpu_tensor_and_refuses_a_device_one_in_torchs_words():
    from dmlprof.backends.remap import _no_pinning

    cpu = torch.zeros(2)
    with _no_pinning():
        assert cpu.pin_memory() is cpu
        with pytest.raises(RuntimeError, match=r"^cannot pin 'metaFloatType' only dense CPU tensors can be pinned$"):
            torch.empty(2, device=DEVICE).pin_memory()
    assert "pin_memory" not in torch.Tensor.__dict__
