"""``--from cuda`` under torch.compile: the CUDA queries Dynamo and inductor make are answered for the scanned device
(backends/remap.py; re-probe 11, case 42).

Told CUDA is there (``torch.cuda.is_available()`` answers True), Dynamo saves and restores the CUDA random state
around every frame it compiles: ``torch.cuda.get_rng_state()`` reached torch's real CUDA, and every compiled model
of a CUDA script failed with "Torch not compiled with CUDA enabled", for which dmlprof advised the flag given.
"""
from __future__ import annotations

import pytest
import torch

from dmlprof.backends.cpu import CpuBackend
from dmlprof.backends.remap import remapped

pytestmark = pytest.mark.live  # Dynamo's compile path: torch-version-sensitive


@pytest.mark.skipif(torch.cuda.is_available(), reason="the remapping's target here is the CPU, with no CUDA")
def test_a_compiled_model_of_a_cuda_script_trains_under_from_cuda():
    torch._dynamo.reset()
    try:
        with remapped("cuda", CpuBackend()):
            model = torch.nn.Linear(4, 2).to("cuda")
            compiled = torch.compile(model, backend="eager")
            compiled(torch.ones(3, 4, device="cuda")).sum().backward()
    finally:
        torch._dynamo.reset()
    assert model.weight.grad is not None


def test_the_cuda_random_state_saved_and_restored_is_the_scanned_devices():
    with remapped("cuda", CpuBackend()):
        state = torch.cuda.get_rng_state()
        first = torch.randn(3, device="cuda")
        torch.cuda.set_rng_state(state)
        again = torch.randn(3, device="cuda")
        states = torch.cuda.get_rng_state_all()
        torch.cuda.set_rng_state_all(states)
        after_all = torch.randn(3, device="cuda")
    assert torch.equal(first, again)
    assert len(states) == 1  # one device, as torch.cuda.device_count() answers
    torch.set_rng_state(states[0])
    assert torch.equal(torch.randn(3), after_all)


def test_the_cuda_device_properties_carry_what_inductors_cache_key_reads_on_a_torch_without_cuda():
    # torch._inductor's cache key reads .name on a CUDA build, .gcnArchName on any other: without it, inductor
    # failed on dmlprof's stand-in (an AttributeError) before it reached its own verdict on the scanned device
    with remapped("cuda", CpuBackend()):
        properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    assert properties.gcnArchName == properties.name


def test_every_cuda_random_call_is_answered_for_the_scanned_device():
    # re-probe 13, case 29: torch.cuda.initial_seed() reached torch's real CUDA under --from cuda (exit 4, "scan it
    # with --from cuda"); every name of torch.cuda.random's API is answered, none left to the real one
    import torch.cuda.random as cuda_random

    with remapped("cuda", CpuBackend()):
        unanswered = [name for name in cuda_random.__all__
                      if getattr(torch.cuda, name) is getattr(cuda_random, name)]
        torch.cuda.manual_seed(3)
        torch.cuda.manual_seed_all(3)
        torch.cuda.seed()
        torch.cuda.seed_all()
        initial = torch.cuda.initial_seed()
    assert unanswered == []
    assert initial == torch.initial_seed()  # the scanned device (the CPU) draws from the CPU's generator
