"""Re-probe 17: under --from cuda on the emulated device (or --device cpu), torch.cuda's memory figures are the
process's resident memory, so the arithmetic a CUDA script does with them goes wrong: a leak check across steps
fails, a peak after reset_peak_memory_stats() is the whole process's peak, and freeing a 4 MiB tensor frees 4 KiB.

    PYTHONPATH=. python -m dmlprof scan docs/probe17/from_cuda_memory_is_process_rss.py --device emulated-dml --from cuda \
        --run-to-end

Got (torch 2.13): "grown < 1 MiB: False 17924096", "peak after reset >= 4 MiB and < 64 MiB: False 406548480",
"del frees: True 4096". On a CUDA device: True, True, 4194304 (the caching allocator's figures are the tensors'). With
`-- assert` the leak check is an assert, as a test suite writes it: exit 3, read as the script's own error.
"""
import sys

import torch
import torch.nn as nn

dev = torch.device("cuda")
m = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.Adam(m.parameters())


def step():
    loss = m(torch.randn(64, 256, device=dev)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


step()
start = torch.cuda.memory_allocated()
for i in range(20):
    step()
grown = torch.cuda.memory_allocated() - start
print("grown < 1 MiB:", grown < 2**20, grown)
if "assert" in sys.argv[1:]:
    assert grown < 2**20, f"memory leak: {grown} bytes over 20 steps"
torch.cuda.reset_peak_memory_stats()
x = torch.empty(1024, 1024, device=dev)   # 4 MiB
peak = torch.cuda.max_memory_allocated()
print("peak after reset >= 4 MiB and < 64 MiB:", 4 * 2**20 <= peak < 64 * 2**20, peak)
before = torch.cuda.memory_allocated()
del x
print("del frees:", torch.cuda.memory_allocated() < before, before - torch.cuda.memory_allocated())
