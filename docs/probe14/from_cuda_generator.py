"""Re-probe 14, case 14: torch.Generator(device="cuda") under --from cuda.

    PYTHONPATH=. python -m dmlprof scan docs/probe14/from_cuda_generator.py --device emulated-dml --from cuda

prints "replay True", then exit 3 "from_cuda_generator.py raised RuntimeError: Cannot get CUDA generator without
ATen_cuda library ..." at the Generator line, read as the script's own error. On CUDA the script runs; --from cuda
answers torch.cuda.*'s RNG calls and device arguments of torch functions (through a TorchFunctionMode), but
torch.Generator is a class, not a torch function, so its device="cuda" reaches real CUDA. Seeded per-device
generators are common (DataLoader/random_split generators, reproducible noise). (--device cpu --from cuda: the same.)
"""
import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(42)
torch.cuda.manual_seed_all(42)
state = torch.cuda.get_rng_state(0)
a = torch.rand(3, device=dev)
torch.cuda.set_rng_state(state, device=0)
print("replay", torch.equal(a, torch.rand(3, device=dev)))
g = torch.Generator(device=dev)
g.manual_seed(3)
print("noise", torch.rand(2, generator=g, device=dev).tolist())
