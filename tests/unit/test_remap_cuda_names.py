"""``--from cuda``: the CUDA names common scripts use, answered for the scanned device (backends/remap.py;
re-probe 14, cases 16, 18, 19, 39). In-process, on the CPU as the scanned device: each of these failed (or answered
False) under the remap, where plainly on CUDA each runs."""
from __future__ import annotations

import pytest
import torch

from dmlprof.backends.cpu import CpuBackend
from dmlprof.backends.remap import remapped, unmapped_note

pytestmark = [pytest.mark.live,  # torch-version-sensitive: torch.cuda's stubs without CUDA
              pytest.mark.skipif(torch.cuda.is_available(), reason="the remapping's target here is the CPU, with no CUDA")]


def test_is_cuda_is_true_for_tensors_and_parameters_on_the_scanned_device():
    with remapped("cuda", CpuBackend()):
        model = torch.nn.Linear(2, 2).cuda()
        weight = next(model.parameters())
        answers = (torch.ones(2, device="cuda").is_cuda, weight.is_cuda, weight.data.is_cuda, weight.detach().is_cuda)
    assert answers == (True, True, True, True)


@pytest.mark.parametrize("spelling", ['("cuda", 0)', '("cuda", 3)', '(type="cuda", index=1)', '("cuda:0")'])
def test_a_cuda_device_with_any_index_is_the_scanned_device(spelling):
    with remapped("cuda", CpuBackend()):
        device = eval(f"torch.device{spelling}")  # noqa: S307 - a literal of this test
    assert device == CpuBackend().device()


def test_data_parallel_on_the_one_device_computes_what_its_module_computes():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    inputs = torch.randn(4, 3)
    expected = model(inputs)
    with remapped("cuda", CpuBackend()):
        parallel = torch.nn.DataParallel(model.cuda())
        out = parallel(inputs)  # CPU inputs, as a CUDA script may hand them: scatter moves them to the device
        out.sum().backward()
    assert torch.equal(out, expected) and model.weight.grad is not None


def test_cuda_generators_device_contexts_and_nvtx_ranges_are_answered():
    with remapped("cuda", CpuBackend()):
        generator = torch.Generator(device="cuda").manual_seed(1)
        drawn = torch.randn(3, generator=generator, device="cuda")
        assert isinstance(generator, torch.Generator) and isinstance(torch.default_generator, torch.Generator)
        with torch.cuda.device(0), torch.cuda.device_of(drawn):
            with torch.cuda.nvtx.range("step"):
                torch.cuda.nvtx.range_push("inner")
                torch.cuda.nvtx.range_pop()
        pinned = torch.empty(2, pin_memory=True)
        summary = torch.cuda.memory_summary()
        peak = torch.cuda.memory_stats()["allocated_bytes.all.peak"]
    assert torch.equal(drawn, torch.randn(3, generator=torch.Generator().manual_seed(1)))
    assert torch.Generator is torch._C.Generator  # put back
    assert pinned.shape == (2,) and isinstance(summary, str) and peak >= 0


def test_an_unmapped_cuda_name_says_so_where_the_script_fails():
    with remapped("cuda", CpuBackend()):
        with pytest.raises(Exception) as failed:
            torch.cuda.Event(enable_timing=True).record()  # torch 2.4's CUDA build makes it, then fails
        note = unmapped_note(failed.value, "cuda")
    assert note is not None and "--from cuda" in note and "torch.cuda.Event" in note
    assert unmapped_note(ValueError("the script's own"), "cuda") is None
    # a failure raised deeper than torch.cuda (an op a torch.cuda frame called: the autocast refusal in torch.amp under
    # torch.cuda.amp.autocast) is not torch.cuda's own: a module of that name calls the script's function
    in_torch_cuda = {"__name__": "torch.cuda.calling"}
    exec("def call(fn):\n    return fn()\n", in_torch_cuda)  # noqa: S102 - a literal of this test

    def raises():
        raise RuntimeError("an op's own")

    with pytest.raises(RuntimeError) as deeper:
        in_torch_cuda["call"](raises)
    assert unmapped_note(deeper.value, "cuda") is None


def test_on_the_emulated_device_a_cuda_generator_draws_what_the_devices_random_calls_draw(emulated_dml_backend):
    """The emulated DirectML device's random calls draw from the CPU's generator; torch has no generator of its own
    for it ("register a generator to the PrivateUse1 dispatch key")."""
    with remapped("cuda", emulated_dml_backend):
        generator = torch.Generator(device="cuda").manual_seed(1)
        drawn = torch.randn(3, generator=generator, device="cuda")
        on_device = (drawn.is_cuda, torch.nn.Linear(2, 2).cuda().weight.is_cuda, torch.ones(1).is_cuda)
        parallel = torch.nn.DataParallel(torch.nn.Linear(3, 1))  # its balance check divided by the device's memory
        assert parallel(torch.ones(2, 3)).device == emulated_dml_backend.device()
    assert torch.equal(drawn.cpu(), torch.randn(3, generator=torch.Generator().manual_seed(1)))
    assert on_device == (True, True, False)


def test_lightnings_gpu_accelerator_is_named_as_not_carried(emulated_dml_backend):
    """Re-probe 16, case 18: Lightning picks its CUDA accelerator (``torch.cuda.is_available()`` answers True), whose
    check of its device refused the scanned one, read as the script's own error."""
    accelerators = pytest.importorskip("lightning.pytorch.accelerators")
    with remapped("cuda", emulated_dml_backend):
        with pytest.raises(Exception, match="Device should be GPU") as refused:
            accelerators.CUDAAccelerator().setup_device(torch.device("cuda"))
        note = unmapped_note(refused.value, "cuda")
    assert note is not None and "Lightning's GPU accelerator" in note and "model file" in note


def test_the_remaps_mode_leaves_torchs_encoder_fast_path_as_it_is():
    """A mode makes ``torch.overrides.has_torch_function`` True, and torch's encoder layer then leaves its fast path
    ("some Tensor argument has_torch_function"): under --from cuda a frozen encoder ran the slow path's calls, where
    the scanned device (torch-directml's PrivateUse1 device, the CPU) takes ``_transformer_encoder_layer_fwd``."""
    import torch
    from torch.overrides import TorchFunctionMode

    from dmlprof.backends.cpu import CpuBackend
    from dmlprof.backends.remap import remapped

    layer = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 3, 4)

    def ran_fast_path() -> bool:
        with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            layer(x)
        return any(event.name == "aten::_transformer_encoder_layer_fwd" for event in prof.events())

    assert ran_fast_path()
    with remapped("cuda", CpuBackend()):
        assert not torch.overrides.has_torch_function((x,)) and ran_fast_path()
        with TorchFunctionMode():  # a mode of the script's own still counts
            assert torch.overrides.has_torch_function((x,))
    assert torch.overrides.has_torch_function.__module__ != "dmlprof.backends.remap"  # restored
