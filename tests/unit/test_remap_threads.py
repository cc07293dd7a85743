"""``--from cuda`` in the threads a script starts (re-probe 16, case 35): a prefetching thread moving batches to
"cuda", a thread pool's workers, a DataLoader's pin-memory thread. The remap's device arguments are a
TorchFunctionMode, which is thread-local: each of these raised "Torch not compiled with CUDA enabled" in its thread
(and a loop waiting on the prefetcher hung). Every wait here has a timeout, so a hang fails rather than blocks."""
from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from dmlprof.backends.cpu import CpuBackend
from dmlprof.backends.remap import remapped

pytestmark = [pytest.mark.live,  # torch-version-sensitive: torch.cuda's stubs without CUDA
              pytest.mark.skipif(torch.cuda.is_available(), reason="the remapping's target here is the CPU, with no CUDA")]

WAIT_S = 60


def _in_a_thread(work):
    """``work()``'s result or exception, from a thread the block starts, as a script's own thread does."""
    outcome: queue.Queue = queue.Queue()

    def run():
        try:
            outcome.put(("ok", work()))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.put(("raised", exc))

    threading.Thread(target=run, daemon=True).start()
    kind, value = outcome.get(timeout=WAIT_S)
    if kind == "raised":
        raise value
    return value


def test_a_prefetching_thread_moves_its_batches_to_the_scanned_device():
    batch = torch.arange(6.0)
    with remapped("cuda", CpuBackend()):
        moved = _in_a_thread(lambda: (batch.to("cuda", non_blocking=True), batch.cuda(), torch.ones(2, device="cuda")))
        is_cuda = _in_a_thread(lambda: moved[0].is_cuda)
    assert all(t.device == CpuBackend().device() for t in moved) and is_cuda
    assert torch.equal(moved[0], batch)


def test_a_subclassed_thread_with_its_own_run_is_answered_too():
    answers: queue.Queue = queue.Queue()

    class Evaluator(threading.Thread):
        def run(self):
            answers.put(torch.zeros(3, device="cuda:0").sum().item())

    with remapped("cuda", CpuBackend()):
        Evaluator(daemon=True).start()
        assert answers.get(timeout=WAIT_S) == 0.0


def test_a_thread_pools_workers_are_answered():
    with remapped("cuda", CpuBackend()), ThreadPoolExecutor(max_workers=2) as pool:
        sums = [f.result(timeout=WAIT_S) for f in [pool.submit(lambda i=i: torch.full((2,), float(i)).cuda().sum().item())
                                                    for i in range(4)]]
    assert sums == [0.0, 2.0, 4.0, 6.0]


def test_a_data_loaders_pin_memory_thread_hands_its_batches_on():
    data = torch.utils.data.TensorDataset(torch.arange(8.0).reshape(4, 2))
    with remapped("cuda", CpuBackend()):
        loader = torch.utils.data.DataLoader(data, batch_size=2, pin_memory=True)
        batches = [batch.to("cuda", non_blocking=True) for (batch,) in loader]
    assert torch.equal(torch.cat(batches), data.tensors[0])


def test_a_thread_started_after_the_scan_is_left_alone():
    with remapped("cuda", CpuBackend()):
        pass
    with pytest.raises((AssertionError, RuntimeError), match="CUDA|NVIDIA"):  # a build without CUDA; one without a driver
        _in_a_thread(lambda: torch.ones(1).to("cuda"))


def test_a_thread_outliving_the_scan_no_longer_maps():
    go, done = threading.Event(), queue.Queue()

    def late():
        go.wait(WAIT_S)
        try:
            torch.ones(1).to("cuda")
            done.put("mapped")
        except (AssertionError, RuntimeError):
            done.put("refused")

    with remapped("cuda", CpuBackend()):
        threading.Thread(target=late, daemon=True).start()
    go.set()
    assert done.get(timeout=WAIT_S) == "refused"  # as the plain torch without CUDA refuses
