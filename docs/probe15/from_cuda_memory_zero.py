"""Re-probe 15: `--from cuda` answers the device's memory as 0, and a CUDA script's memory arithmetic fails.

Training scripts log memory use as a share of the card and size batches from what is free:
`torch.cuda.memory_allocated() / torch.cuda.get_device_properties(0).total_memory`, `free, total =
torch.cuda.mem_get_info(); frac = free / total`.

    PYTHONPATH=. python -m dmlprof scan docs/probe15/from_cuda_memory_zero.py --device emulated-dml --from cuda
    PYTHONPATH=. python -m dmlprof scan docs/probe15/from_cuda_memory_zero.py --device cpu --from cuda

emulated-dml: `total_memory` 0 and `mem_get_info()` (0, 0): "raised ZeroDivisionError: division by zero" at the
share, exit 3 read as the script's error. `--device cpu`: total_memory is the host's, but `mem_get_info()` says 0
bytes free, so the script's batch-size rule picks its smallest batch ("batch 1") where a CUDA card with free memory
gives 64. Also `memory_allocated()` is 0 while `max_memory_allocated()` is hundreds of MB. A CUDA card reports its
memory; a memory the device does not report could be answered with the host's (the emulated device's tensors live
there), or the names left unmapped with the one-line 'not mapped' error.
"""
import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
m = nn.Linear(256, 256).to(dev)
if torch.cuda.is_available():
    free, total = torch.cuda.mem_get_info()
    batch = 64 if free > 256 * 256 * 4 * 64 * 4 else 1
    print("allocated", torch.cuda.memory_allocated(), "peak", torch.cuda.max_memory_allocated(), "free", free,
          "batch", batch, flush=True)
    share = torch.cuda.memory_allocated() / torch.cuda.get_device_properties(0).total_memory
    print(f"memory share {share:.1%}; free share {free / total:.1%}", flush=True)
else:
    batch = 64
print("loss", m(torch.randn(batch, 256, device=dev)).square().mean().item() > 0)
