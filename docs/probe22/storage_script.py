"""A CUDA script's storage reads on its device tensors, each tried and its outcome printed (`dml` arg: realdml):
data_ptr, untyped_storage, is_set_to, share_memory_, is_shared, numpy, pin_memory, set_, storage_offset, nbytes,
HF's id_tensor_storage, safetensors save_file, torch.equal."""
import os, sys, tempfile, torch
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
x = torch.randn(4, 3).to(dev); v = x[1:]
def tryit(name, f):
    try: r = f(); print(f"PROBE {name}: ok {r!r}"[:160], flush=True)
    except Exception as e: print(f"PROBE {name}: {type(e).__name__}: {str(e).splitlines()[0][:110]}", flush=True)
tryit("data_ptr", lambda: type(x.data_ptr()).__name__)
tryit("untyped_storage", lambda: x.untyped_storage().nbytes())
tryit("is_set_to", lambda: x.is_set_to(x))
tryit("is_shared", lambda: x.is_shared())
tryit("share_memory_", lambda: x.share_memory_().device.type)
tryit("numpy", lambda: x.numpy().shape)
tryit("pin_memory", lambda: x.pin_memory().device.type)
tryit("is_pinned", lambda: x.is_pinned())
tryit("storage_offset", lambda: (x.storage_offset(), v.storage_offset()))
tryit("nbytes", lambda: (x.nbytes, x.element_size()))
tryit("_base", lambda: (v._base is x, v._is_view()))
tryit("equal", lambda: torch.equal(x, x.clone()))
def hf_id():
    from transformers.pytorch_utils import id_tensor_storage
    return id_tensor_storage(x) == id_tensor_storage(v)
tryit("id_tensor_storage", hf_id)
def st_save():
    from safetensors.torch import save_file, load_file
    p = os.path.join(tempfile.mkdtemp(), "w.safetensors"); save_file({"w": x, "b": x[0].clone()}, p)
    return round(load_file(p)["w"].sum().item(), 5)
tryit("safetensors_save_file", st_save)
tryit("dlpack", lambda: torch.utils.dlpack.to_dlpack(x) is not None)
tryit("storage_type", lambda: x.storage_type().__name__)
tryit("array", lambda: len(list(x.tolist())))
print("sum", round(x.sum().item(), 5))
if os.environ.get("SET") == "1":  # realdml: SIGSEGV here
    tryit("set_", lambda: torch.empty(0, device=dev).set_(x).sum().item())
