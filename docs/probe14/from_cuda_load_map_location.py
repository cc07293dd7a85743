"""Re-probe 14, case 38: torch.load(..., map_location="cuda") under --from cuda.

    PYTHONPATH=. python -m dmlprof scan docs/probe14/from_cuda_load_map_location.py --device emulated-dml --from cuda

exit 3, "raised ValueError: Expected a cuda device, but got: privateuseone:0" (--device cpu --from cuda: "but got:
cpu"; torch 2.13 and 2.4.1) at the load, read as the script's error. map_location=torch.device("cuda"), a lambda
calling .cuda(), a dict and None all load. torch.load's string path restores through torch's CUDA deserializer,
which builds torch.device(location) and checks its type is "cuda"; dmlprof/backends/remap.py's mode turns that
internal torch.device("cuda") into the scanned device, so torch's own check fails. The resume idiom
torch.load(path, map_location="cuda") / f"cuda:{rank}" hits it.
"""
import io

import torch
import torch.nn as nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Linear(3, 2).to(dev)
buf = io.BytesIO()
torch.save(m.state_dict(), buf)
buf.seek(0)
state = torch.load(buf, map_location=dev, weights_only=True)
m.load_state_dict(state)
print("resumed", state["weight"].device.type, round(state["weight"].sum().item(), 4))
