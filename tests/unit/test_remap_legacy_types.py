"""``--from cuda`` and the legacy typed tensors of older CUDA scripts (re-probe 15, cases 32 and 33): PyTorch-GAN's
``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``, ``Tensor(n, 1).fill_(1.0)``, ``imgs.type(Tensor)``
failed in torch's C type check ("Torch not compiled with CUDA enabled"), and the one line advised the --from cuda
already given."""
from __future__ import annotations

import pytest
import torch

from dmlprof.backends.cpu import CpuBackend
from dmlprof.backends.remap import remapped, unmapped_note

pytestmark = [pytest.mark.live,  # torch-version-sensitive: torch.cuda's stubs without CUDA
              pytest.mark.skipif(torch.cuda.is_available(), reason="the remapping's target here is the CPU, with no CUDA")]


def _gan_step(cuda_types):
    """PyTorch-GAN's idiom, as its scripts write it."""
    Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
    valid = Tensor(5, 1).fill_(1.0)
    real = torch.arange(20).reshape(5, 4).type(Tensor)
    longs = torch.cuda.LongTensor([1, 2]) if cuda_types else torch.LongTensor([1, 2])
    return valid, real, longs


def test_a_legacy_cuda_type_makes_and_converts_to_the_scanned_devices_tensors_of_its_dtype():
    with remapped("cuda", CpuBackend()):
        valid, real, longs = _gan_step(cuda_types=True)
        sized = torch.cuda.HalfTensor(torch.Size([2, 3]))
        by_name = torch.ones(2).type("torch.cuda.DoubleTensor")
        checks = (isinstance(real, torch.cuda.FloatTensor), isinstance(real, torch.cuda.LongTensor),
                  isinstance(longs, torch.cuda.LongTensor), torch.cuda.FloatTensor.dtype)
    assert valid.shape == (5, 1) and torch.equal(valid, torch.ones(5, 1))
    assert real.dtype == torch.float32 and torch.equal(real, torch.arange(20.).reshape(5, 4))
    assert longs.dtype == torch.int64 and torch.equal(longs, torch.tensor([1, 2]))
    assert sized.shape == (2, 3) and sized.dtype == torch.float16 and by_name.dtype == torch.float64
    assert checks == (True, False, True, torch.float32)
    assert type(torch.cuda.FloatTensor) is type(torch.FloatTensor)  # put back: torch's own type again


def test_every_legacy_cuda_type_this_torch_has_is_mapped():
    legacy = [name for name in dir(torch.cuda) if isinstance(getattr(torch.cuda, name), type(torch.FloatTensor))]
    with remapped("cuda", CpuBackend()):
        made = {name: getattr(torch.cuda, name)(2).dtype for name in legacy}
    assert len(made) >= 10 and all(dtype == getattr(torch, name).dtype for name, dtype in made.items())


def test_on_the_emulated_device_a_legacy_type_is_the_devices_and_its_type_name_is_cudas(emulated_dml_backend):
    with remapped("cuda", emulated_dml_backend):
        valid, real, _ = _gan_step(cuda_types=True)
        names = (real.type(), torch.ones(1).type(), real.type(torch.FloatTensor).device.type)
        on_device = (isinstance(real, torch.cuda.FloatTensor), isinstance(torch.ones(1), torch.cuda.FloatTensor))
    assert valid.device == real.device == emulated_dml_backend.device()
    assert names == ("torch.cuda.FloatTensor", "torch.FloatTensor", "cpu")
    assert on_device == (True, False)


def test_is_initialized_turns_true_at_the_first_cuda_request_as_cudas_does():
    with remapped("cuda", CpuBackend()):
        before = torch.cuda.is_initialized()
        torch.zeros(1, device="cuda")
        after = torch.cuda.is_initialized()
    assert (before, after) == (False, True)


def test_a_default_cuda_tensor_type_is_named_as_not_mapped_not_as_wanting_from_cuda():
    with remapped("cuda", CpuBackend()):
        with pytest.raises(TypeError) as failed:
            torch.set_default_tensor_type(torch.cuda.FloatTensor)
    note = unmapped_note(failed.value, "cuda")
    assert note is not None and note.startswith("--from cuda does not map") and torch.get_default_dtype() == torch.float32
    assert unmapped_note(RuntimeError("Torch not compiled with CUDA enabled, the script's own words"), "mps") is None
