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
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

import torch

from dmlprof.backends.base import Availability, Backend, MemoryReading, refused_in_place
from dmlprof.directml.failures import DirectMLSemantics
from dmlprof.facts import BackendFacts

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


def adapter_possible(platform: str = sys.platform, wsl_dir: Path = WSL_LIBRARY_DIR,
                     library_path: Optional[str] = None) -> tuple[bool, str]:
    """Whether this OS can expose a D3D12 adapter at all (no device call made).

    On Linux a D3D12 provider is WSL2's (``/usr/lib/wsl/lib``, ``/dev/dxg``) or any other
    ``libd3d12.so`` on ``LD_LIBRARY_PATH`` (a translation layer such as vkd3d-proton, see
    docs/realdml.md), but never the stubs torch-directml ships in its own folder.
    """
    if platform == "win32":
        return True, "Windows"
    if platform.startswith("linux"):
        if (wsl_dir / "libd3d12.so").exists() or Path("/dev/dxg").exists():
            return True, "WSL2 with GPU libraries"
        provider = d3d12_provider(os.environ.get("LD_LIBRARY_PATH", "") if library_path is None else library_path)
        if provider is not None:
            return True, f"a D3D12 provider on LD_LIBRARY_PATH ({provider})"
        return False, ("Linux without WSL2's /usr/lib/wsl/lib or /dev/dxg, and no D3D12 provider (libd3d12.so) on "
                       "LD_LIBRARY_PATH: no D3D12 adapter can exist")
    return False, f"DirectML does not run on {platform}"


def d3d12_provider(library_path: str) -> Optional[Path]:
    """The first folder of ``library_path`` holding a ``libd3d12.so`` that is not torch-directml's own stub."""
    for entry in filter(None, library_path.split(os.pathsep)):
        folder = Path(entry)
        if (folder / "libd3d12.so").is_file() and not _is_directml_package_folder(folder):
            return folder
    return None


def _is_directml_package_folder(folder: Path) -> bool:
    """torch-directml's wheel holds stub libd3d12/libdxcore beside its native module: they provide no adapter."""
    return folder.name == "torch_directml" or any(folder.glob("torch_directml_native*"))


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


#: adapters that are a CPU drawing DirectML in software: their times are not a GPU's
_SOFTWARE_ADAPTERS = (("llvmpipe", "lavapipe, Mesa's Vulkan on the CPU"), ("lavapipe", "lavapipe, Mesa's Vulkan on the CPU"),
                      ("swiftshader", "SwiftShader, Vulkan on the CPU"),
                      ("microsoft basic render driver", "WARP, Windows' DirectX on the CPU"))


def software_adapter(name: str) -> str:
    """What drew on a software adapter (``"lavapipe, Mesa's Vulkan on the CPU"``), or ``""`` for a GPU."""
    lowered = name.lower()
    return next((what for marker, what in _SOFTWARE_ADAPTERS if marker in lowered), "")


#: set to let every call run on the real device, even one dmlprof's rules say ends the process (the scan's
#: supervisor then reports the crash itself: exit 7)
NO_REFUSALS_ENV = "DMLPROF_NO_REFUSALS"


class DmlBackend(DirectMLSemantics, Backend):
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

        from dmlprof.directml.device_module import fakes_as_on_directml

        fakes_as_on_directml(self.device_type, emulated=False)  # torch.compile: Dynamo leaves dmlprof's code alone

    def device(self) -> torch.device:
        import torch_directml

        return torch_directml.device(self.index)

    def device_name(self) -> str:
        import torch_directml

        # Names come from the adapter's description, a fixed-size field: some end in NUL padding.
        return torch_directml.device_name(self.index).replace("\x00", "").strip()

    def adapter(self) -> dict:
        """This adapter's answers from the child-process probe (name, float64), by index."""
        details = probe_adapters().details or {}
        pick = lambda key: (details.get(key) or [None] * (self.index + 1))[self.index]  # noqa: E731
        return {"name": (pick("names") or "").replace("\x00", "").strip(), "float64": pick("float64")}

    @property
    def float64_support(self) -> Optional[bool]:
        return self.adapter()["float64"]

    def run_meta(self) -> BackendFacts:
        """The adapter's class (float64 or not) and, on a software adapter, what its times are."""
        facts = super().run_meta()
        emulation = software_adapter(self.device_name())
        timing = (f"wall time per call on {emulation}: verdicts, errors and numerics are DirectML's, "
                  "the times are a CPU's, never a GPU's") if emulation else None
        return replace(facts, device=replace(facts.device, float64=self.float64_support, emulation=emulation),
                       timing=timing)

    refuses_calls = True
    # Measured on realdml (torch-directml 0.2.5): every view reports storage_offset() 0 (x[:, 4:], x[1],
    # as_strided(..., 5)), and data_ptr() and untyped_storage() raise: the offsets are the view calls'
    views_report_offsets = False
    # Measured on realdml (LeNet-5, no warm-up, 3 recorded steps): with empty shader caches the first step took
    # 32.9 s and the next 1.7 s, each new op and shape taking seconds on its first call (mm 1.4-3.3 s each); with
    # Mesa's shader cache warm and vkd3d-proton's empty, 1.4 s and 1.2 s. The time is the driver compiling the
    # shaders of DirectML's kernels, once per kernel (docs/realdml.md).
    first_step_note = "first calls compile DirectML shaders"

    def refusal_for(self, failure):
        """torch-directml's fatal checks (complex tensors, SIGSEGV in some kernels) end the process with no
        Python error: the call that would is refused, a courteous stop before it (the scan's supervisor keeps
        the recording of a call that does end the process, dmlprof.survival). ``DMLPROF_NO_REFUSALS=1`` lets
        every call run as it would without dmlprof."""
        from dmlprof.directml.failures import ABORTS, DirectMLFailure

        if os.environ.get(NO_REFUSALS_ENV):
            return None
        return refused_in_place(DirectMLFailure(failure), self) if failure.kind == ABORTS else None

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
