"""CUDA and ROCm (HIP builds of PyTorch present themselves as ``cuda``)."""
from __future__ import annotations

import torch

from dmlprof.backends.base import Availability, Backend, MemoryReading


class CudaBackend(Backend):
    name = "cuda"
    device_type = "cuda"
    profiler_device_activity = True

    @classmethod
    def availability(cls) -> Availability:
        if not torch.cuda.is_available():
            flavour = "ROCm" if getattr(torch.version, "hip", None) else "CUDA"
            return Availability(False, f"torch.cuda.is_available() is False ({flavour} build: {torch.version.cuda or torch.version.hip or 'none'})")
        return Availability(True, details={"device_count": torch.cuda.device_count()})

    def device(self) -> torch.device:
        return torch.device("cuda", self.index)

    def device_name(self) -> str:
        return torch.cuda.get_device_name(self.index)

    def synchronize(self, outputs=None) -> None:
        torch.cuda.synchronize(self.index)

    def reset_peak_memory(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.index)

    def memory(self) -> MemoryReading:
        total = torch.cuda.get_device_properties(self.index).total_memory
        return MemoryReading(
            allocated_bytes=torch.cuda.memory_allocated(self.index),
            peak_bytes=torch.cuda.max_memory_allocated(self.index),
            total_bytes=total,
            source="torch.cuda caching allocator",
        )

    def profiler_activities(self):
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]

    def versions(self) -> dict:
        if getattr(torch.version, "hip", None):
            return {"hip": torch.version.hip}
        return {"cuda": torch.version.cuda}
