"""``--from cuda``: a CUDA script's memory arithmetic (re-probe 15, case 34). The emulated DirectML device answered
``get_device_properties(0).total_memory`` 0 and ``mem_get_info()`` (0, 0) (a script's share raised
ZeroDivisionError); the CPU answered 0 bytes free (a batch rule picked its smallest batch) and ``memory_allocated()``
0 beside a peak of hundreds of MB. Both devices' tensors live in host memory: the host's figures answer."""
from __future__ import annotations

import pytest
import torch

from dmlprof.backends import host_memory
from dmlprof.backends.base import Backend, MemoryReading
from dmlprof.backends.cpu import CpuBackend
from dmlprof.backends.remap import remapped

pytestmark = [pytest.mark.live,  # torch-version-sensitive: torch.cuda's stubs without CUDA
              pytest.mark.skipif(torch.cuda.is_available(), reason="the remapping's target here is the CPU, with no CUDA")]


def _memory_arithmetic():
    """What the probe's script computes: the share of the card in use, the free share, and a batch by what is free."""
    free, total = torch.cuda.mem_get_info()
    allocated, peak = torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()
    share = allocated / torch.cuda.get_device_properties(0).total_memory
    stats = torch.cuda.memory_stats()
    return {"free": free, "total": total, "allocated": allocated, "peak": peak, "share": share, "free_share": free / total,
            "stats_current": stats["allocated_bytes.all.current"], "stats_peak": stats["allocated_bytes.all.peak"]}


def _assert_host_figures(seen):
    host_total = host_memory.total_physical_memory_bytes()
    assert seen["total"] == host_total > 0
    assert 0 < seen["free"] <= seen["total"] and 0 < seen["free_share"] <= 1
    assert 0 < seen["allocated"] <= seen["peak"] and 0 < seen["share"] < 1
    assert 0 < seen["stats_current"] <= seen["stats_peak"]


def test_on_the_cpu_a_cuda_scripts_memory_readings_are_the_hosts():
    with remapped("cuda", CpuBackend()):
        torch.ones(256, 256, device="cuda")
        seen = _memory_arithmetic()
    _assert_host_figures(seen)


def test_on_the_emulated_device_a_cuda_scripts_memory_arithmetic_divides_by_the_hosts_memory(emulated_dml_backend):
    with remapped("cuda", emulated_dml_backend):
        held = torch.ones(256, 256, device="cuda")  # the device's count is of what is live: kept
        seen = _memory_arithmetic()
        del held
    _assert_host_figures(seen)


def test_a_device_of_its_own_memory_answers_free_as_its_total_less_what_it_holds():
    class _CardOfHundredBytes(Backend):
        def memory(self):
            return MemoryReading(allocated_bytes=30, peak_bytes=40, total_bytes=100)

    with remapped("cuda", _CardOfHundredBytes()):
        readings = (torch.cuda.mem_get_info(), torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())
    assert readings == ((70, 100), 30, 40)


def test_the_host_memory_readers_agree_with_each_other():
    total, available = host_memory.total_physical_memory_bytes(), host_memory.available_physical_memory_bytes()
    resident = host_memory.resident_bytes()
    assert 0 < available <= total and 0 < resident < total


def test_a_memory_fraction_is_kept_and_caps_nothing():
    """Re-probe 16, case 28: a shared-GPU script's ``set_per_process_memory_fraction(0.5, 0)`` failed the scan; it caps
    CUDA's caching allocator only, which the scanned device has none of."""
    with remapped("cuda", CpuBackend()):
        torch.cuda.set_per_process_memory_fraction(0.5, 0)
        kept = torch.cuda.get_per_process_memory_fraction()
        big = torch.ones(1 << 20, device="cuda")  # no cap on what the script allocates
        with pytest.raises(ValueError, match="Allowed range"):
            torch.cuda.set_per_process_memory_fraction(1.5)
    assert kept == 0.5 and big.numel() == 1 << 20


def _steady_loop_growth(steps: int = 8) -> int:
    """A CUDA script's leak check: what memory_allocated() grows over steps of a loop that keeps nothing."""
    model = torch.nn.Linear(64, 64).to("cuda")
    optimizer = torch.optim.Adam(model.parameters())

    def step():
        loss = model(torch.randn(32, 64, device="cuda")).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()
    start = torch.cuda.memory_allocated()
    for _ in range(steps):
        step()
    return torch.cuda.memory_allocated() - start


def test_on_the_emulated_device_a_cuda_scripts_memory_arithmetic_is_cudas(emulated_dml_backend):
    """Re-probe 17, 17: memory_allocated() was the process's resident memory, so a leak check saw 17 MB of growth
    over 20 steps, reset_peak_memory_stats() reset nothing, and `del` of a 4 MiB tensor freed 4 KiB. The emulated
    device's allocator counts its storages' bytes: growth 0, the peak of what is live, `del` frees the tensor."""
    with remapped("cuda", emulated_dml_backend):
        grown = _steady_loop_growth()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        x = torch.empty(1024, 1024, device="cuda")  # 4 MiB
        peak, held = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
        stats = torch.cuda.memory_stats()
        del x
        freed = held - torch.cuda.memory_allocated()
    assert grown == 0
    assert held - before == 4 * 2**20 and before + 4 * 2**20 <= peak < before + 8 * 2**20
    assert freed == 4 * 2**20
    assert stats["allocated_bytes.all.current"] == held and stats["allocated_bytes.all.peak"] == peak


def test_on_the_cpu_the_figure_is_held_so_the_processs_own_growth_never_shows():
    """The CPU counts no tensor bytes: the figure is the process's resident memory when the script began, held
    (docs/scripts.md), so memory the process gains beside the script's tensors (Python's, dmlprof's recording: here
    32 MiB of bytes) fails no leak check; it was the resident memory now, which grew by it."""
    with remapped("cuda", CpuBackend()):
        grown = _steady_loop_growth()
        start = torch.cuda.memory_allocated()
        ballast = bytes(range(256)) * 2**17  # 32 MiB written: resident
        gained = torch.cuda.memory_allocated() - start
        torch.cuda.reset_peak_memory_stats()
        allocated, peak = torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()
    del ballast
    assert grown == 0 and gained == 0 and 0 < allocated == peak
