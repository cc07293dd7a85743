"""Re-probe 16: under --from cuda, a thread's CUDA requests are not answered: a prefetching thread that moves
batches to "cuda" dies, and the training loop waiting on it hangs (or runs without it).

    timeout 300 python -m dmlprof scan docs/probe16/from_cuda_background_thread.py --device emulated-dml --from cuda
    timeout 300 python -m dmlprof scan docs/probe16/from_cuda_background_thread.py --device cpu --from cuda

Plainly (no GPU: device "cpu") it prints 6 losses and "done". Under --from cuda the main thread's
`torch.cuda.is_available()` is True, so the prefetcher thread calls `x.to("cuda", non_blocking=True)`, which the
remap does not answer in that thread (its TorchFunctionMode is the main thread's): "Exception in thread ...
AssertionError: Torch not compiled with CUDA enabled", and the loop waits on the queue until `timeout` ends it
(measured 2026-12-07: exit 124 / 143; with an evaluator thread instead, exit 0 with the thread's traceback on
stderr). docs/scripts.md does not say that --from cuda covers the main thread only.
"""
import queue
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"


def prefetch(batches: queue.Queue):
    g = torch.Generator().manual_seed(0)
    for _ in range(6):
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        batches.put((x.to(device, non_blocking=True), y.to(device, non_blocking=True)))
    batches.put(None)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches: queue.Queue = queue.Queue(maxsize=2)
    threading.Thread(target=prefetch, args=(batches,), daemon=True).start()
    while (item := batches.get()) is not None:
        x, y = item
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item():.4f}", flush=True)
    print("done")
