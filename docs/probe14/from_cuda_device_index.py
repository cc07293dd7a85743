"""Re-probe 14, case 18: torch.device("cuda", local_rank) under --from cuda.

    PYTHONPATH=. python -m dmlprof scan docs/probe14/from_cuda_device_index.py --device emulated-dml --from cuda
    (also --device cpu --from cuda, --target dml --from cuda; torch 2.13 and 2.4.1)

exit 3, "raised TypeError: device(): argument 'type' (position 1) must be str, not torch.device (at ...:NN)", read as
the script's error. Plainly (any torch, with or without CUDA) the line builds a device. dmlprof/backends/remap.py's
_DeviceArguments mode sees torch.device itself as a torch function and swaps its "cuda" argument for the target
torch.device, leaving the index: torch.device(torch.device("privateuseone:0"), 0) is a TypeError. The DDP / launch
script idiom `torch.device("cuda", args.local_rank)` (and torch.device(type="cuda", index=i)) hits it on its first line,
and so does `nn.DataParallel(model)`, which builds torch.device(device_type, device_ids[0]) inside torch.
"""
import os

import torch
import torch.nn as nn

local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
print("device", device.type)
torch.manual_seed(0)
m = nn.Linear(3, 1).to(device)
print("out", round(m(torch.ones(2, 3, device=device)).sum().item(), 4))
