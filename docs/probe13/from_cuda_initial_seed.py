"""Re-probe 13 (docs/probe13.md case 29): torch.cuda.initial_seed() under --from cuda.

`python -m dmlprof scan docs/probe13/from_cuda_initial_seed.py --device emulated-dml --from cuda` exits 4: "the script
asks for CUDA, which does not work on this machine (at ...:11) (scan it with --from cuda ...)", although it was.
get_rng_state/set_rng_state, their _all forms and fork_rng(devices=[0]) are answered.
"""
import torch

torch.cuda.manual_seed(3)
x = torch.randn(2, device="cuda")
print(torch.cuda.initial_seed())
print("ok")
