"""Re-probe 14, case 17: torch.cuda names of common CUDA scripts that --from cuda leaves unanswered.

    PYTHONPATH=. python -m dmlprof scan docs/probe14/from_cuda_unanswered.py --device emulated-dml --from cuda --run-to-end

Each is tried alone; under --from cuda (torch 2.13) these fail, each of them an exit 3 "raised ..." read as the
script's own error when not caught (docs/scripts.md lists what is answered: events and streams are documented as
unmapped, these are not):
    torch.Generator(device="cuda")      RuntimeError: Cannot get CUDA generator without ATen_cuda library ...
    with torch.cuda.device(0):          RuntimeError: PyTorch was compiled without CUDA support
    torch.cuda.memory_summary()         KeyError: 'allocated_bytes.all.current' (dmlprof's memory_stats answer lacks it)
    torch.empty(2, pin_memory=True)     NotImplementedError: You should register `PrivateUse1HooksInterface` ...
                                        (docs/scripts.md: "pin_memory is skipped"; Tensor.pin_memory is, this is not)
    torch.cuda.nvtx.range_push("a")     RuntimeError: NVTX functions not installed
Plainly on a CUDA machine each runs. Generator(device="cuda") (seeded DataLoader / random_split / noise generators)
and `with torch.cuda.device(rank):` are common.
"""
import torch

if not torch.cuda.is_available():
    print("no cuda")
    raise SystemExit
tries = {
    "Generator(device=cuda)": lambda: torch.Generator(device="cuda").manual_seed(1),
    "device(0) ctx": lambda: torch.cuda.device(0).__enter__(),
    "memory_summary()": lambda: type(torch.cuda.memory_summary()).__name__,
    "empty(pin_memory=True)": lambda: torch.empty(2, pin_memory=True).shape,
    "nvtx.range_push": lambda: torch.cuda.nvtx.range_push("a"),
}
for name, call in tries.items():
    try:
        print(f"{name:28s} ok {call()}")
    except Exception as e:  # noqa: BLE001 - each name is reported, not fatal
        print(f"{name:28s} FAIL {type(e).__name__}: {str(e)[:90]}")
