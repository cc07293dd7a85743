"""Reading this machine into a :class:`~dmlprof.doctor.snapshot.Snapshot`, once and safely.

Versions come from ``importlib.metadata``, the rest from environment variables, path
existence and torch's own ``is_available()`` calls; no device is touched. torch-directml
segfaults or raises "Unknown error" where no D3D12 adapter exists, so it is asked only
where one can exist, and then in a child process (:func:`gather_directml`).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform as _platform
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from dmlprof.doctor.settings import PLACEBO_ENV, find_settings
from dmlprof.doctor.source_calls import find_calls
from dmlprof.doctor.snapshot import DirectMLProbe, Snapshot, TorchFacts

PACKAGES = ("torch", "torchvision", "torch-directml", "pandas", "tabulate", "jinja2", "numpy")
#: Variables the checks read, recorded in the snapshot when set.
WATCHED_ENV = PLACEBO_ENV + (
    "DML_VISIBLE_DEVICES",
    "PYTORCH_ENABLE_MPS_FALLBACK",
    "PYTORCH_DEBUG_XPU_FALLBACK",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
)
WSL_PATHS = ("/usr/lib/wsl/lib/libd3d12.so", "/dev/dxg")


def gather_snapshot(device: str = "auto", files: Sequence[str] = (), probe: bool = True) -> Snapshot:
    """Read this machine into a Snapshot, safely (DirectML is only asked in a child process)."""
    packages = {name: _package_version(name) for name in PACKAGES}
    if not packages["torch-directml"] and importlib.util.find_spec("torch_directml") is not None:
        packages["torch-directml"] = "unknown version"
    facts, torch_error = gather_torch()
    possible, reason, dml_probe = gather_directml(probe=probe)
    return Snapshot(
        platform=sys.platform,
        platform_release=_platform.release(),
        python_version=tuple(sys.version_info[:3]),
        packages=packages,
        requires={"torch-directml": _requires("torch-directml")} if packages["torch-directml"] else {},
        env={name: os.environ[name] for name in WATCHED_ENV if name in os.environ},
        paths={path: Path(path).exists() for path in WSL_PATHS},
        torch=facts,
        torch_error=torch_error,
        directml_adapter_possible=possible,
        directml_adapter_reason=reason,
        directml_probe=dml_probe,
        device=device,
        files=tuple(str(f) for f in files),
        source_findings=_findings(files),
        predictor_available=_predictor_available(),
        measured_table_problem=_measured_table_problem(),
    )


def _findings(files: Sequence[str]) -> dict:
    """The settings and the calls found in the user's files (calls keyed ``call:<key>``)."""
    if not files:
        return {}
    calls = {f"call:{key}": where for key, where in find_calls(files).items()}
    return {**find_settings(files), **calls}


def gather_torch() -> Tuple[Optional[TorchFacts], str]:
    """What torch says about its builds and devices. Only safe calls: no DirectML, no allocation."""
    try:
        import torch
    except Exception as exc:  # ImportError, or an OSError from a broken install
        return None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    facts = TorchFacts(version=torch.__version__, cuda_version=torch.version.cuda,
                       hip_version=getattr(torch.version, "hip", None))
    try:
        facts.cuda_available = bool(torch.cuda.is_available())
        if facts.cuda_available:
            facts.cuda_devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:
        facts.cuda_available = False
    mps = getattr(torch.backends, "mps", None)
    try:
        facts.mps_built = bool(mps and mps.is_built())
        facts.mps_available = bool(mps and mps.is_available())
    except Exception:
        facts.mps_available = False
    xpu = getattr(torch, "xpu", None)
    facts.xpu_present = xpu is not None
    try:
        facts.xpu_available = bool(xpu and xpu.is_available())
        if facts.xpu_available:
            facts.xpu_devices = [xpu.get_device_name(i) for i in range(xpu.device_count())]
    except Exception:
        facts.xpu_available = False
    return facts, ""


def gather_directml(probe: bool = True) -> Tuple[bool, str, Optional[DirectMLProbe]]:
    """Adapter possibility (no device call), then, where one can exist, the child-process probe."""
    from dmlprof.backends.dml import adapter_possible, directml_installed, probe_adapters

    possible, reason = adapter_possible()
    if not (probe and possible and directml_installed()):
        return possible, reason, None
    return possible, reason, probe_from_availability(probe_adapters())


def probe_from_availability(answer) -> DirectMLProbe:
    """The probe's :class:`~dmlprof.backends.base.Availability` as one record per adapter."""
    details = answer.details or {}
    names = details.get("names", [])
    float64 = details.get("float64") or [None] * len(names)
    memory = details.get("memory_used_mb") or [None] * len(names)
    adapters = [{"index": i, "name": n, "float64": f, "memory_used_mb": m}
                for i, (n, f, m) in enumerate(zip(names, float64, memory))]
    return DirectMLProbe(answer.available, answer.reason, adapters)


def _package_version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _requires(name: str) -> List[str]:
    try:
        return list(importlib.metadata.requires(name) or [])
    except importlib.metadata.PackageNotFoundError:
        return []


def _measured_table_problem() -> str:
    from dmlprof.tables.measured import measured_table_problem

    return measured_table_problem("dml")


def _predictor_available() -> bool:
    try:
        from dmlprof.predict import predict_scan  # noqa: F401
    except ImportError:
        return False
    return True
