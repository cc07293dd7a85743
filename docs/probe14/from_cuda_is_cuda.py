"""Re-probe 14, case 39: Tensor.is_cuda under --from cuda (docs/scripts.md: answered).

    PYTHONPATH=. python -m dmlprof scan docs/probe14/from_cuda_is_cuda.py --device emulated-dml --from cuda --run-to-end
    (also --device cpu --from cuda; torch 2.13 and 2.4.1)

prints "is_cuda False False" and ends at the assert, exit 3 "raised AssertionError: the fused path needs CUDA
tensors", read as the script's error. On CUDA both are True. dmlprof/backends/remap.py keeps
`getattr(torch.Tensor, "is_cuda").__get__` and compares the function handed to __torch_function__ with `is`; each
attribute access makes a new method-wrapper (`torch.Tensor.is_cuda.__get__ is torch.Tensor.is_cuda.__get__` is
False, `==` is True), so the answer never applies. Every `.is_cuda` branch of a scanned CUDA script takes its
non-CUDA side (or fails its assert); no test covers it.
"""
import torch
import torch.nn as nn

if torch.cuda.is_available():
    x = torch.ones(2, device="cuda")
    m = nn.Linear(2, 2).cuda()
    print("is_cuda", x.is_cuda, next(m.parameters()).is_cuda)
    assert x.is_cuda, "the fused path needs CUDA tensors"
    print("out", m(x).sum().item() != 0)
