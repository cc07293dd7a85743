"""Apple MPS. Its CPU fallback exists only with PYTORCH_ENABLE_MPS_FALLBACK=1."""
from __future__ import annotations

import os

import torch

from dmlprof.backends.base import Availability, Backend, MemoryReading


class MpsBackend(Backend):
    name = "mps"
    device_type = "mps"
    fallback_warning_name = "MPS"
    has_cpu_fallback = True

    @classmethod
    def availability(cls) -> Availability:
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            return Availability(False, "torch.backends.mps.is_available() is False")
        return Availability(True, details={"fallback_enabled": os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK") == "1"})

    def device_name(self) -> str:
        return "Apple MPS"

    def synchronize(self, outputs=None) -> None:
        torch.mps.synchronize()

    def memory(self) -> MemoryReading:
        return MemoryReading(
            allocated_bytes=torch.mps.current_allocated_memory(),
            total_bytes=getattr(torch.mps, "recommended_max_memory", lambda: None)(),
            source="torch.mps",
        )
