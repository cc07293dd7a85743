"""The CPU as the scan's device: every call runs natively on it."""
from dmlprof.backends.base import Backend, MemoryReading
from dmlprof.backends.host_memory import peak_rss_bytes, total_physical_memory_bytes


class CpuBackend(Backend):
    name = "cpu"
    device_type = "cpu"
    memory_is_host = True

    def memory(self) -> MemoryReading:
        # The CPU's "device memory" is the machine's RAM: a budget is a share of it.
        return MemoryReading(peak_bytes=peak_rss_bytes(), total_bytes=total_physical_memory_bytes(), source="process peak RSS")
