"""dmlprof's torch_directml for the processes a scanned script spawns (DataLoader workers, multiprocessing).

While a script runs on a stand-in DirectML device (``--target dml``, ``--device emulated-dml``), its own
process gets the stand-in of ``dmlprof.backends.directml_shim``. A process it starts with multiprocessing's
``spawn`` (the default on Windows and macOS; ``DataLoader(num_workers=N, multiprocessing_context="spawn")``)
imports the script again, with its ``import torch_directml``; where torch-directml is not installed that
import failed and the worker died, where without dmlprof it would have run. This folder is put in front of the
installed packages on the scanned process's ``sys.path`` (behind the script's own folder), which spawn hands
to its children (it holds only this module), so they import the stand-in as the scanned process does, whatever
is installed (a torch-directml that cannot load here, without libd3d12, ended them too). A spawned process is
not recorded and holds no stand-in device: it names the device (``device()``, which makes no tensor); a
tensor made there fails with torch's own error, and torch-directml's fused kernels say why. It serves a stand-in
without a folder of its own (``Backend.spawned_stand_in``): the emulated device's spawned processes load it
(``spawned_emulated``); scripts never run on the prediction's (``--target dml`` runs them on the emulated one).
"""
import torch

__version__ = "0.2.5.dev240914"
__dmlprof_stand_in__ = True
_WHY = ("dmlprof's stand-in DirectML device lives in the scanned process only; a process the script spawned "
        "(a DataLoader worker) has none: keep the worker's tensors on the CPU, as a DataLoader worker's are")


def _check(device_id):
    if device_id is not None and device_id != 0:
        raise Exception(f"Invalid device_id argument supplied {device_id}. device_id must be in range [0, 1).")


def device(device_id=None):
    _check(device_id)
    return torch.device("privateuseone", 0)


def is_available():
    return True


def device_count():
    return 1


def default_device():
    return 0


def device_name(device_id=0):
    return "dmlprof stand-in (a spawned process of the scanned script)" if device_id == 0 else ""


def has_float64_support(device_id=0):
    return False


def disable_tiled_resources(is_disabled):
    return None


def gpu_memory(device_id=0, mb_per_tile=1):
    _check(device_id)
    return [0.0]


def _fused(name):
    def fused(*args, **kwargs):
        raise NotImplementedError(f"torch_directml.{name}: {_WHY}")

    fused.__name__ = name
    return fused


for _name in ("multi_head_attention", "mlp_phi2", "mlp_llama", "mlp_phi3", "rmsnorm", "apply_rotary_position_emb"):
    globals()[_name] = _fused(_name)
