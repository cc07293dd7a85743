"""DirectML through torch-directml (AMD, Intel, NVIDIA GPUs on Windows and WSL).

torch-directml segfaults or raises "Unknown error" when asked to enumerate
devices where no D3D12 adapter exists, so detection first decides whether an
adapter *can* exist here, and then asks in a child process, never in ours.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import torch

from dmlprof.backends.base import Availability, Backend, MemoryReading

WSL_LIBRARY_DIR = Path("/usr/lib/wsl/lib")

_PROBE = (
    "import json, torch_directml as d\n"
    "def ask(fn, i):\n"
    "    try:\n"
    "        return fn(i)\n"
    "    except Exception:\n"
    "        return None\n"
    "n = d.device_count()\n"
    "r = range(n)\n"
    "print(json.dumps({'count': n, 'names': [d.device_name(i) for i in r],\n"
    "                  'float64': [ask(d.has_float64_support, i) for i in r],\n"
    "                  'memory_used_mb': [ask(lambda j: sum(d.gpu_memory(j)), i) for i in r]}))\n"
)


def directml_installed() -> bool:
    return importlib.util.find_spec("torch_directml") is not None


def adapter_possible(platform: str = sys.platform, wsl_dir: Path = WSL_LIBRARY_DIR) -> tuple[bool, str]:
    """Whether this OS can expose a D3D12 adapter at all (no device call made)."""
    if platform == "win32":
        return True, "Windows"
    if platform.startswith("linux"):
        if (wsl_dir / "libd3d12.so").exists() or Path("/dev/dxg").exists():
            return True, "WSL2 with GPU libraries"
        return False, "Linux without WSL2's /usr/lib/wsl/lib or /dev/dxg: no D3D12 adapter can exist"
    return False, f"DirectML does not run on {platform}"


@lru_cache(maxsize=1)
def probe_adapters(timeout_s: float = 60.0) -> Availability:
    """Ask torch-directml for its adapters in a child process (it may crash)."""
    env = dict(os.environ)
    if sys.platform.startswith("linux") and WSL_LIBRARY_DIR.exists():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(WSL_LIBRARY_DIR), env.get("LD_LIBRARY_PATH")]))
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return Availability(False, "torch-directml did not answer within the probe timeout")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return Availability(False, f"torch-directml could not enumerate adapters: {last}")
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Availability(False, "torch-directml's adapter probe printed nothing readable")
    if not found["count"]:
        return Availability(False, "torch-directml sees no adapter")
    return Availability(True, details=found)


class DmlBackend(Backend):
    name = "dml"
    device_type = "privateuseone"  # torch-directml keeps PyTorch's default name
    fallback_warning_name = "DML"
    has_cpu_fallback = True

    @classmethod
    def availability(cls) -> Availability:
        if not directml_installed():
            return Availability(False, "torch-directml is not installed (pip install 'dmlprof[dml]')")
        possible, why = adapter_possible()
        if not possible:
            return Availability(False, why)
        return probe_adapters()

    def prepare(self) -> None:
        import torch_directml  # noqa: F401  (registers the privateuseone kernels)

    def device(self) -> torch.device:
        import torch_directml

        return torch_directml.device(self.index)

    def device_name(self) -> str:
        import torch_directml

        return torch_directml.device_name(self.index)

    def synchronize(self, outputs=None) -> None:
        # DirectML has no synchronize(); reading back one element of the op's
        # own output waits until the queue has produced it.
        for tensor in outputs or ():
            if isinstance(tensor, torch.Tensor) and tensor.device.type == self.device_type and tensor.numel():
                tensor.reshape(-1)[:1].to("cpu")
                return

    def memory(self) -> MemoryReading:
        import torch_directml

        try:
            used_mb = sum(torch_directml.gpu_memory(self.index))
            return MemoryReading(allocated_bytes=int(used_mb * 2**20), source="torch_directml.gpu_memory")
        except Exception:
            return super().memory()

    def versions(self) -> dict:
        from importlib.metadata import version

        return {"torch_directml": version("torch-directml")}
