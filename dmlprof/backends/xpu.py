"""Intel XPU (torch.xpu, PyTorch >= 2.4)."""
from __future__ import annotations

import re
from typing import Optional

import torch

from dmlprof.backends.base import FALLBACK_WARNING, Availability, Backend, MemoryReading

# With PYTORCH_DEBUG_XPU_FALLBACK=1 the XPU backend names each op it sends to
# the CPU; the wording has changed between releases, so match loosely.
_XPU_FALLBACK = re.compile(r"'(?P<op>aten::[^']+)'.*XPU.*fall", re.IGNORECASE | re.DOTALL)


class XpuBackend(Backend):
    name = "xpu"
    device_type = "xpu"
    fallback_warning_name = "XPU"
    has_cpu_fallback = True

    @classmethod
    def availability(cls) -> Availability:
        xpu = getattr(torch, "xpu", None)
        if xpu is None or not xpu.is_available():
            return Availability(False, "torch.xpu.is_available() is False")
        return Availability(True, details={"device_count": xpu.device_count()})

    def device(self) -> torch.device:
        return torch.device("xpu", self.index)

    def device_name(self) -> str:
        return torch.xpu.get_device_name(self.index)

    def synchronize(self, outputs=None) -> None:
        torch.xpu.synchronize(self.index)

    def reset_peak_memory(self) -> None:
        torch.xpu.reset_peak_memory_stats(self.index)

    def memory(self) -> MemoryReading:
        return MemoryReading(
            allocated_bytes=torch.xpu.memory_allocated(self.index),
            peak_bytes=torch.xpu.max_memory_allocated(self.index),
            total_bytes=torch.xpu.get_device_properties(self.index).total_memory,
            source="torch.xpu allocator",
        )

    def fallback_ops_in(self, message: str) -> Optional[str]:
        match = FALLBACK_WARNING.search(message) or _XPU_FALLBACK.search(message)
        return match.group("op") if match else None
