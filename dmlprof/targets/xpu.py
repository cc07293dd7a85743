"""``--target xpu``: Intel GPUs through torch's own XPU device (torch >= 2.5; Windows too).

Beyond the shared rules (:mod:`dmlprof.targets.base`) XPU adds nothing a wheel records: its registrations are
in native_functions.yaml since torch 2.14 (before, in intel/torch-xpu-ops' own yaml), and its always-on CPU
fallback list is torch-xpu-ops' XPUFallback source at the commit torch pins. Its boxed fallback raises unless
PYTORCH_ENABLE_XPU_FALLBACK=1, and names each op it sends to the CPU only with PYTORCH_DEBUG_XPU_FALLBACK=1.
"""
from __future__ import annotations

from dmlprof.targets.base import TargetSemantics


class Semantics(TargetSemantics):
    title = "XPU"
    fallback_env = "PYTORCH_ENABLE_XPU_FALLBACK"
    # torch.autocast("xpu") casts to bfloat16 (its default) or float16, by ATen's AutocastXPU kernels
    autocast_key = "AutocastXPU"
    # torch's Tensor.__deepcopy__ clones per tensor only for sparse, lazy/xla/mtia/mps/maia/meta/ipu and a storage-less
    # PrivateUse1 tensor (torch/_tensor.py, 2.4.1 and 2.13 alike); XPU's tensors have storage: it is deep-copied
    deepcopy_keeps_views = True
    # Data-centre GPUs (Max) run float64; Arc and integrated GPUs have no float64 hardware, and no wheel says
    # which one a user has: the prediction assumes the device runs every dtype its kernels are built for.
    assumes = "assumed a GPU that runs float64 (Intel Arc and integrated GPUs do not)"
