"""The CPU as the scan's device: every call runs natively on it."""
from dmlprof.backends.base import Backend


class CpuBackend(Backend):
    name = "cpu"
    device_type = "cpu"
