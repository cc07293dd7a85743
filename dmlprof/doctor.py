"""``dmlprof doctor``: what is installed, what will break, and what to change.

Two halves, kept apart so every check can be tested without the machine it
describes:

* :func:`gather_snapshot` reads this machine once, safely, into a
  :class:`Snapshot` (versions, environment variables, a few paths, what torch
  says about its devices, and what torch-directml says in a child process,
  asked only where a DirectML adapter can exist at all).
* each ``check_*`` function takes a Snapshot and returns one :class:`Check`
  (or ``None`` when it has nothing true to say here). Tests build simulated
  Snapshots and pass them in.

Exit status (see docs/doctor.md): 0 unless a *blocking* check fails, i.e. one
without which dmlprof cannot run at all (Python or torch too old or missing,
pandas or tabulate missing) or the device named with ``--device`` cannot be
used. Then 1. ``--strict`` makes any failed check exit 1.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import platform as _platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

STATUSES = ("ok", "warn", "fail", "info")

#: dmlprof's own floor (pyproject's requires-python and dependencies)
MIN_PYTHON = (3, 9)
MIN_TORCH = (2, 4)
#: torch 2.4.1 and torch-directml 0.2.5 publish wheels for CPython 3.8 to 3.12 only
#: (checked with ``pip index versions --python-version``).
DIRECTML_MAX_PYTHON = (3, 12)
#: what torch-directml's last release pins; used only when the installed
#: package's own metadata cannot be read.
DIRECTML_FALLBACK_PINS = {"torch": "2.4.1", "torchvision": "0.19.1"}
DIRECTML_INSTALL = "pip install torch-directml==0.2.5.dev240914 (pulls torch==2.4.1, torchvision==0.19.1)"

PACKAGES = ("torch", "torchvision", "torch-directml", "pandas", "tabulate", "jinja2", "numpy")

#: Variables that circulate in DirectML advice but that nothing reads (not in
#: torch-directml's binaries).
PLACEBO_ENV = ("DML_GRAPH_COMPILER_OPTIONS", "DML_EXECUTION_MODE")
#: Variables the checks read, recorded in the snapshot when set.
WATCHED_ENV = PLACEBO_ENV + (
    "DML_VISIBLE_DEVICES",
    "PYTORCH_ENABLE_MPS_FALLBACK",
    "PYTORCH_DEBUG_XPU_FALLBACK",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
)
WSL_PATHS = ("/usr/lib/wsl/lib/libd3d12.so", "/dev/dxg")


# -- data ----------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    """One row of the doctor's table."""

    name: str
    status: str  # one of STATUSES
    detail: str
    remedy: str = ""
    #: a failure here means dmlprof cannot be used as asked
    blocking: bool = False

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


@dataclass
class TorchFacts:
    """What the imported torch says about itself and its devices (no device is touched to learn it)."""

    version: str
    cuda_version: Optional[str] = None
    hip_version: Optional[str] = None
    cuda_available: bool = False
    cuda_devices: List[str] = field(default_factory=list)
    mps_built: bool = False
    mps_available: bool = False
    xpu_present: bool = False  # torch.xpu exists (torch >= 2.4)
    xpu_available: bool = False
    xpu_devices: List[str] = field(default_factory=list)


@dataclass
class DirectMLProbe:
    """torch-directml's answer from a child process (it may crash, so never in ours)."""

    available: bool
    reason: str = ""
    adapters: List[dict] = field(default_factory=list)  # {"index", "name", "float64", "memory_used_mb"}


@dataclass
class Snapshot:
    """Everything the checks look at, gathered once. Build one by hand in tests."""

    platform: str = "linux"  # sys.platform
    platform_release: str = ""  # platform.release(): "microsoft" in it means WSL
    python_version: Tuple[int, int, int] = (3, 11, 0)
    packages: Dict[str, Optional[str]] = field(default_factory=dict)  # distribution -> version, None if absent
    requires: Dict[str, List[str]] = field(default_factory=dict)  # distribution -> its Requires-Dist
    env: Dict[str, str] = field(default_factory=dict)  # WATCHED_ENV variables that are set
    paths: Dict[str, bool] = field(default_factory=dict)  # WSL_PATHS -> exists
    torch: Optional[TorchFacts] = None
    torch_error: str = ""  # why torch did not import, when it did not
    directml_adapter_possible: bool = False
    directml_adapter_reason: str = ""
    directml_probe: Optional[DirectMLProbe] = None  # None: not asked (see gather_snapshot)
    device: str = "auto"  # what the user will pass to scan --device
    files: Tuple[str, ...] = ()  # source files the user asked us to read
    source_findings: Dict[str, List[str]] = field(default_factory=dict)  # setting -> ["file:line", ...]
    predictor_available: bool = False  # `dmlprof scan --target dml` works in this version

    @property
    def directml_installed(self) -> bool:
        return bool(self.packages.get("torch-directml"))

    @property
    def wsl(self) -> bool:
        return self.platform.startswith("linux") and "microsoft" in self.platform_release.lower()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# -- helpers -------------------------------------------------------------------
def release(version: Optional[str]) -> Tuple[int, ...]:
    """The numeric release of a version string: ``"2.4.1+cu121"`` -> ``(2, 4, 1)``; ``()`` if none."""
    if not version:
        return ()
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


def _same_release(installed: Optional[str], pinned: str) -> bool:
    """``2.4.1+cu121`` satisfies ``==2.4.1``; ``2.4.10`` does not."""
    a, b = release(installed), release(pinned)
    width = max(len(a), len(b))
    return bool(a) and a + (0,) * (width - len(a)) == b + (0,) * (width - len(b))


def exact_pins(requirements: Iterable[str]) -> Dict[str, str]:
    """``{"torch": "2.4.1"}`` from Requires-Dist lines such as ``torch==2.4.1``; other specifiers are skipped."""
    pins = {}
    for line in requirements or ():
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)", line)
        if match and "extra ==" not in line:
            pins[_normal(match.group(1))] = match.group(2)
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def torchvision_for(torch_version: str) -> Optional[str]:
    """The torchvision minor series built for a torch 2.x release (2.m pairs with 0.(m+15))."""
    parts = release(torch_version)
    if len(parts) >= 2 and parts[0] == 2:
        return f"0.{parts[1] + 15}"
    return None


def _fmt_python(version: Sequence[int]) -> str:
    return ".".join(str(p) for p in version)


def _join(items: Sequence[str], limit: int = 4) -> str:
    shown = list(items[:limit])
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


# -- which device a scan will use ----------------------------------------------
def device_available(snap: Snapshot, name: str) -> Tuple[bool, str]:
    """Whether ``scan --device NAME`` can run here, and why not, from the snapshot alone."""
    facts = snap.torch
    if name == "cpu":
        return (facts is not None, snap.torch_error or "torch is available")
    if facts is None:
        return False, "torch does not import"
    if name == "cuda":
        return facts.cuda_available, "torch.cuda.is_available() is False"
    if name == "mps":
        return facts.mps_available, "torch.backends.mps.is_available() is False"
    if name == "xpu":
        return facts.xpu_available, "torch.xpu.is_available() is False"
    if name == "dml":
        if not snap.directml_installed:
            return False, "torch-directml is not installed"
        if not snap.directml_adapter_possible:
            return False, snap.directml_adapter_reason
        probe = snap.directml_probe
        if probe is None:
            return False, "torch-directml was not asked for its adapters"
        return probe.available, probe.reason
    if name == "emulated-dml":
        return True, "the emulated DirectML device builds a C++ extension on first use"
    return False, f"unknown device {name!r}"


def auto_device(snap: Snapshot) -> str:
    """What ``--device auto`` picks: the first available of the runner's AUTO_ORDER, else the CPU."""
    from dmlprof.backends import AUTO_ORDER

    for name in AUTO_ORDER:
        if device_available(snap, name)[0]:
            return name
    return "cpu"


def scan_device(snap: Snapshot) -> str:
    return auto_device(snap) if snap.device == "auto" else snap.device


def directml_is_the_device(snap: Snapshot) -> bool:
    """True when the user's scans run on DirectML: asked for, or what auto picks."""
    return scan_device(snap) == "dml"


# -- checks: the interpreter and packages --------------------------------------------
def check_python(snap: Snapshot) -> Check:
    version = _fmt_python(snap.python_version)
    if tuple(snap.python_version[:2]) < MIN_PYTHON:
        return Check("python", "fail", f"Python {version}; dmlprof needs {_fmt_python(MIN_PYTHON)} or newer",
                     f"use Python {_fmt_python(MIN_PYTHON)} to {_fmt_python(DIRECTML_MAX_PYTHON)}", blocking=True)
    directml_os = snap.platform == "win32" or snap.platform.startswith("linux")
    if directml_os and tuple(snap.python_version[:2]) > DIRECTML_MAX_PYTHON:
        return Check("python", "info",
                     f"Python {version}: torch 2.4.1 and torch-directml publish no wheels for it",
                     f"for DirectML, make a Python {_fmt_python(DIRECTML_MAX_PYTHON)} environment")
    return Check("python", "ok", f"Python {version} on {snap.platform}")


def check_torch(snap: Snapshot) -> Check:
    facts = snap.torch
    if facts is None:
        why = snap.torch_error or "not installed"
        return Check("torch", "fail", f"torch does not import: {why}",
                     "pip install torch (DirectML users: torch==2.4.1)", blocking=True)
    if release(facts.version)[:2] < MIN_TORCH:
        return Check("torch", "fail", f"torch {facts.version}; dmlprof needs {_fmt_python(MIN_TORCH)} or newer",
                     "pip install -U torch (DirectML users: torch==2.4.1)", blocking=True)
    if facts.hip_version:
        build = f"ROCm {facts.hip_version} build"
    elif facts.cuda_version:
        build = f"CUDA {facts.cuda_version} build"
    else:
        build = "CPU build" + (" with MPS" if facts.mps_built else "")
    return Check("torch", "ok", f"torch {facts.version} ({build})")


def check_dependencies(snap: Snapshot) -> Check:
    missing = [name for name in ("pandas", "tabulate") if not snap.packages.get(name)]
    if missing:
        return Check("dmlprof dependencies", "fail", f"missing: {', '.join(missing)}",
                     f"pip install {' '.join(missing)}", blocking=True)
    if not snap.packages.get("jinja2"):
        return Check("dmlprof dependencies", "warn", "jinja2 is missing: --html reports cannot be written",
                     "pip install jinja2")
    return Check("dmlprof dependencies", "ok",
                 ", ".join(f"{n} {snap.packages[n]}" for n in ("pandas", "tabulate", "jinja2")))


def check_directml_package(snap: Snapshot) -> Check:
    version = snap.packages.get("torch-directml")
    if version:
        return Check("torch-directml", "ok", f"torch-directml {version} installed")
    return Check("torch-directml", "info", "torch-directml is not installed",
                 f"for DirectML (Windows or WSL2): {DIRECTML_INSTALL}" if _directml_os(snap) else "")


def _directml_os(snap: Snapshot) -> bool:
    return snap.platform == "win32" or snap.platform.startswith("linux")


def _directml_pins(snap: Snapshot) -> Dict[str, str]:
    pins = exact_pins(snap.requires.get("torch-directml", ()))
    return pins or dict(DIRECTML_FALLBACK_PINS)


def check_directml_torch_pin(snap: Snapshot) -> Optional[Check]:
    """torch-directml's native module is built against one torch release; any other fails to load."""
    if not snap.directml_installed:
        return None
    wanted = _directml_pins(snap).get("torch")
    installed = snap.packages.get("torch") or (snap.torch.version if snap.torch else None)
    if wanted is None:
        return Check("torch-directml pin", "info", "torch-directml's metadata pins no torch release")
    if not installed:
        return Check("torch-directml pin", "fail", f"torch-directml needs torch=={wanted}; torch is not installed",
                     f"pip install torch=={wanted}")
    if _same_release(installed, wanted):
        return Check("torch-directml pin", "ok", f"torch {installed} matches torch-directml's torch=={wanted}")
    pins = " ".join(f"{n}=={v}" for n, v in _directml_pins(snap).items() if n in ("torch", "torchvision"))
    return Check("torch-directml pin", "fail",
                 f"torch-directml needs torch=={wanted} but torch {installed} is installed: it will not load",
                 f"pip install {pins}, or use a separate environment for DirectML")


def check_torchvision(snap: Snapshot) -> Check:
    version = snap.packages.get("torchvision")
    if not version:
        return Check("torchvision", "info", "torchvision is not installed (optional)")
    torch_version = snap.packages.get("torch") or (snap.torch.version if snap.torch else None)
    pinned = _directml_pins(snap).get("torchvision") if snap.directml_installed else None
    if pinned:
        if _same_release(version, pinned):
            return Check("torchvision", "ok", f"torchvision {version} matches torch-directml's torchvision=={pinned}")
        return Check("torchvision", "fail",
                     f"torch-directml pins torchvision=={pinned} but {version} is installed",
                     f"pip install torchvision=={pinned}")
    expected = torchvision_for(torch_version) if torch_version else None
    if expected is None:
        return Check("torchvision", "info", f"torchvision {version} (cannot tell its pairing with torch {torch_version})")
    if release(version)[:2] == release(expected)[:2]:
        return Check("torchvision", "ok", f"torchvision {version} pairs with torch {torch_version}")
    return Check("torchvision", "fail",
                 f"torchvision {version} is not built for torch {torch_version} (it pairs with {expected}.x): "
                 "its ops fail to load", f"pip install 'torchvision=={expected}.*'")


def check_exact_predictions(snap: Snapshot) -> Optional[Check]:
    """Whose code paths a prediction or an emulated scan follows, and how to get torch-directml's own.

    torch-directml 0.2.5 pins torch 2.4.1; a newer torch takes other paths in
    places (attention reaches ``aten::isneginf.out`` since torch 2.5), so its
    predictions describe that torch, not what a DirectML user runs. torch 2.4.1
    and torch-directml install on any Linux or Windows machine (no DirectML
    hardware needed: nothing asks for an adapter), which makes predictions exact.
    """
    facts = snap.torch
    if facts is None:
        return None
    pinned = _directml_pins(snap).get("torch", DIRECTML_FALLBACK_PINS["torch"])
    if _same_release(facts.version, pinned):
        return Check("exact predictions", "ok",
                     f"torch {facts.version}: --target dml and emulated scans follow the code paths of torch {pinned}, "
                     "the torch DirectML users run")
    detail = (f"--target dml and emulated scans follow torch {facts.version}'s code paths; DirectML users run torch "
              f"{pinned} (torch-directml's pin), where some ops differ (e.g. attention's aten::isneginf.out is "
              "reached only since torch 2.5; dmlprof.tables.drift lists those measured on the zoo's training steps)")
    if snap.platform == "darwin":
        return Check("exact predictions", "info", detail,
                     f"torch-directml has no macOS wheels: for exact predictions run dmlprof on a Linux or Windows "
                     f"machine (or container) in a venv with torch=={pinned} torch-directml==0.2.5.dev240914")
    windows = snap.platform == "win32"
    bin_dir = "dml241\\Scripts\\" if windows else "dml241/bin/"
    too_new = tuple(snap.python_version[:2]) > DIRECTML_MAX_PYTHON
    python = ("py -3.12" if windows else "python3.12") if too_new else "python"
    return Check("exact predictions", "info", detail,
                 f"exact predictions on this machine, no DirectML hardware needed: {python} -m venv dml241, then in "
                 f"dmlprof's folder {bin_dir}pip install \"numpy<2\" -e \".[dml]\" (brings torch {pinned} and "
                 f"torch-directml), then {bin_dir}dmlprof scan model.py --target dml"
                 + (f" (torch {pinned} has wheels for CPython 3.8 to 3.12)" if too_new else ""))


# -- checks: devices -------------------------------------------------------------------
_PREDICT = "`dmlprof scan --target dml` predicts DirectML coverage without the device"


def check_directml_adapter_possible(snap: Snapshot) -> Check:
    """Whether this OS can expose a D3D12 adapter at all, decided without asking torch-directml."""
    name = "DirectML adapter possible"
    if snap.directml_adapter_possible:
        return Check(name, "ok", snap.directml_adapter_reason or "yes")
    reason = snap.directml_adapter_reason or "no D3D12 adapter can exist here"
    if snap.wsl:
        remedy = "install the Windows GPU driver with WSL2 support, then restart WSL (wsl --shutdown)"
    elif _directml_os(snap):
        remedy = "DirectML needs Windows, or WSL2 with the Windows GPU driver"
    else:
        remedy = ""
    if snap.predictor_available:
        remedy = "; ".join(filter(None, [remedy, _PREDICT]))
    if snap.directml_installed or snap.device == "dml":
        return Check(name, "warn", f"torch-directml is installed, but {reason}"
                     if snap.directml_installed else reason, remedy)
    return Check(name, "info", reason, remedy)


def check_directml_adapters(snap: Snapshot) -> Optional[Check]:
    """Device names and memory in use, from the child-process probe."""
    probe = snap.directml_probe
    if probe is None:
        return None
    name = "DirectML adapters"
    hidden = snap.env.get("DML_VISIBLE_DEVICES")
    hint = f"; DML_VISIBLE_DEVICES={hidden} may hide adapters" if hidden is not None else ""
    if not probe.available:
        status = "warn" if "no adapter" in probe.reason else "fail"
        return Check(name, status, probe.reason or "torch-directml reports no adapter",
                     "update the GPU driver (on WSL2, the Windows driver with WSL support)" + hint)
    from dmlprof.backends.dml import software_adapter

    shown, software = [], []
    for adapter in probe.adapters:
        adapter_name = str(adapter.get("name") or "unnamed").replace("\x00", "").strip()
        text = f"[{adapter.get('index', len(shown))}] {adapter_name}"
        used = adapter.get("memory_used_mb")
        if used is not None:
            text += f", {float(used):.0f} MiB in use"
        emulation = software_adapter(adapter_name)
        if emulation:
            text += f" (a software adapter: {emulation})"
            software.append(emulation)
        shown.append(text)
    notes = ["torch-directml reports memory in use, not capacity"] if shown else []
    if software:
        notes.insert(0, "on a software adapter DirectML itself runs (its verdicts, errors and numerics are real), "
                        "but times are the CPU's, never a GPU's (docs/realdml.md)")
    return Check(name, "ok", _join(shown) if shown else "available", "; ".join(notes))


def check_directml_float64(snap: Snapshot) -> Optional[Check]:
    probe = snap.directml_probe
    if probe is None or not probe.available:
        return None
    name = "DirectML float64"
    without = [str(a.get("index", i)) for i, a in enumerate(probe.adapters) if a.get("float64") is False]
    unknown = [str(a.get("index", i)) for i, a in enumerate(probe.adapters) if a.get("float64") is None]
    if without:
        return Check(name, "warn", f"adapter {', '.join(without)} cannot run float64: "
                     "\"The GPU device does not support Double (Float64) operations!\"",
                     "keep tensors float32: model.float(), no dtype=torch.float64 or .double()")
    if unknown:
        return Check(name, "info", f"torch-directml did not say whether adapter {', '.join(unknown)} supports float64")
    return Check(name, "ok", "every adapter supports float64")


def check_cuda(snap: Snapshot) -> Optional[Check]:
    facts = snap.torch
    if facts is None:
        return None
    flavour = f"ROCm {facts.hip_version}" if facts.hip_version else f"CUDA {facts.cuda_version}"
    name = "ROCm" if facts.hip_version else "CUDA"
    if facts.cuda_available:
        return Check(name, "ok", f"{flavour}: {len(facts.cuda_devices)} device(s): {_join(facts.cuda_devices)}")
    if not (facts.cuda_version or facts.hip_version):
        return Check("CUDA / ROCm", "info", "this torch is built without CUDA or ROCm")
    visible = snap.env.get("HIP_VISIBLE_DEVICES" if facts.hip_version else "CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return Check(name, "warn", f"{flavour} build, but {name} devices are hidden "
                     f"({'HIP' if facts.hip_version else 'CUDA'}_VISIBLE_DEVICES={visible!r})",
                     "unset the variable or name the devices to use")
    remedy = "check the driver (rocm-smi)" if facts.hip_version else "check the driver (nvidia-smi)"
    return Check(name, "info", f"{flavour} build, but torch sees no GPU", remedy)


def check_mps(snap: Snapshot) -> Optional[Check]:
    facts = snap.torch
    if facts is None:
        return None
    if snap.platform != "darwin":
        return None  # Apple-only; a row saying so on every other OS is noise
    fallback_on = snap.env.get("PYTORCH_ENABLE_MPS_FALLBACK") == "1"
    if facts.mps_available:
        if fallback_on:
            return Check("MPS", "ok", "MPS available; CPU fallback on (PYTORCH_ENABLE_MPS_FALLBACK=1)")
        return Check("MPS", "warn",
                     "MPS available, CPU fallback off: an op without an MPS kernel raises NotImplementedError",
                     "export PYTORCH_ENABLE_MPS_FALLBACK=1 before starting Python; dmlprof reports each fallback")
    if facts.mps_built:
        return Check("MPS", "warn", "torch has MPS, but it is not available (macOS 12.3+ on Apple silicon or an AMD GPU needed)",
                     "update macOS, or use the CPU")
    return Check("MPS", "info", "this torch is built without MPS", "pip install torch (the macOS wheels include MPS)")


def check_xpu(snap: Snapshot) -> Optional[Check]:
    facts = snap.torch
    if facts is None:
        return None
    if not facts.xpu_present:
        return Check("Intel XPU", "info", f"torch {facts.version} has no torch.xpu")
    if not facts.xpu_available:
        return Check("Intel XPU", "info", "torch.xpu sees no Intel GPU")
    devices = f"{len(facts.xpu_devices)} device(s): {_join(facts.xpu_devices)}"
    if snap.env.get("PYTORCH_DEBUG_XPU_FALLBACK") != "1":
        return Check("Intel XPU", "warn", f"{devices}; XPU falls back to the CPU without saying so",
                     "export PYTORCH_DEBUG_XPU_FALLBACK=1 so dmlprof sees each fallback")
    return Check("Intel XPU", "ok", f"{devices}; fallbacks are reported (PYTORCH_DEBUG_XPU_FALLBACK=1)")


def check_scan_device(snap: Snapshot) -> Check:
    """The device ``dmlprof scan`` will use; blocking when the one asked for is not there."""
    if snap.device == "auto":
        chosen = auto_device(snap)
        if chosen == "cpu":
            return Check("scan device", "info", "--device auto will use the CPU: no accelerator found",
                         _PREDICT if snap.predictor_available else "")
        return Check("scan device", "ok", f"--device auto will use {chosen}")
    available, why = device_available(snap, snap.device)
    if available:
        return Check("scan device", "ok", f"--device {snap.device} is available")
    return Check("scan device", "fail", f"--device {snap.device} cannot be used: {why}",
                 "fix the rows above, or pick another --device", blocking=True)


# -- checks: settings known to fail on DirectML -----------------------------------------
@dataclass(frozen=True)
class RiskySetting:
    key: str
    name: str
    pattern: re.Pattern
    failure: str
    remedy: str


RISKY_SETTINGS = (
    RiskySetting(
        "with_stack", "profiler with_stack",
        re.compile(r"with_stack\s*=\s*True"),
        "torch.profiler(with_stack=True) crashes silently on DirectML",
        "leave with_stack off on DirectML; dmlprof records each op's source line itself",
    ),
    RiskySetting(
        "inference_mode", "inference_mode",
        re.compile(r"\binference_mode\b"),
        "torch.inference_mode() fails on DirectML (\"Cannot set version_counter for inference tensor\")",
        "use torch.no_grad() instead",
    ),
    RiskySetting(
        "bf16", "bfloat16",
        re.compile(r"\bbfloat16\b|\bbf16\b"),
        "bfloat16 ends the process on DirectML (a fatal check: \"Invalid or unsupported data type BFloat16\")",
        "use float16 (model.half(); torch.autocast has no DirectML kernels) or float32",
    ),
    RiskySetting(
        "autocast", "autocast",
        re.compile(r"\bautocast\b|\bGradScaler\b"),
        "mixed precision fails on DirectML: torch-directml registers no autocast kernels, and GradScaler's "
        "unscale_ needs float64",
        "train in float32 on DirectML (no torch.autocast, no GradScaler), or cast model and inputs to float16 yourself",
    ),
    RiskySetting(
        "float64", "float64",
        re.compile(r"\bfloat64\b|\.double\(\s*\)|\btorch\.double\b"),
        "float64 fails on DirectML devices without double support",
        "keep tensors float32: model.float(), no dtype=torch.float64 or .double()",
    ),
)


def find_settings(paths: Sequence[str], read: Callable[[str], str] = None) -> Dict[str, List[str]]:
    """``{setting key: ["file:line", ...]}`` for each RISKY_SETTINGS pattern in the files (comments skipped).

    The files are read as text, never imported or run.
    """
    read = read or (lambda p: Path(p).read_text(encoding="utf-8", errors="replace"))
    found: Dict[str, List[str]] = {}
    for path in paths:
        for number, line in enumerate(read(path).splitlines(), 1):
            code = line.split("#", 1)[0]
            for setting in RISKY_SETTINGS:
                if setting.pattern.search(code):
                    found.setdefault(setting.key, []).append(f"{Path(path).name}:{number}")
    return found


def _setting_check(snap: Snapshot, key: str) -> Optional[Check]:
    setting = next(s for s in RISKY_SETTINGS if s.key == key)
    where = snap.source_findings.get(key, [])
    on_dml = directml_is_the_device(snap)
    if key == "float64" and on_dml and snap.directml_probe and snap.directml_probe.adapters:
        if all(a.get("float64") is True for a in snap.directml_probe.adapters):
            # The float64 row above says so; this adapter runs doubles.
            return Check(setting.name, "ok", "the DirectML adapter supports float64"
                         + (f" (used at {_join(where)})" if where else ""))
    if not on_dml:
        if where:
            return Check(setting.name, "info", f"used at {_join(where)}; {setting.failure}", setting.remedy)
        return None
    if snap.files and not where:
        return Check(setting.name, "ok", f"not used in {_join([Path(f).name for f in snap.files])}")
    if where:
        return Check(setting.name, "warn", f"used at {_join(where)}: {setting.failure}", setting.remedy)
    return Check(setting.name, "warn", setting.failure, setting.remedy)


def check_with_stack(snap: Snapshot) -> Optional[Check]:
    return _setting_check(snap, "with_stack")


def check_inference_mode(snap: Snapshot) -> Optional[Check]:
    return _setting_check(snap, "inference_mode")


def check_bf16(snap: Snapshot) -> Optional[Check]:
    return _setting_check(snap, "bf16")


def check_autocast(snap: Snapshot) -> Optional[Check]:
    return _setting_check(snap, "autocast")


def check_float64(snap: Snapshot) -> Optional[Check]:
    return _setting_check(snap, "float64")


# -- checks: environment variables ---------------------------------------------------------
_NOT_REAL = ("torch.dml.empty_cache(), torch.backends.dml and ProfilerActivity.DML "
             "do not exist either")


def check_placebo_env(snap: Snapshot) -> Optional[Check]:
    """Variables from blog posts that torch-directml never reads."""
    set_vars = [f"{name}={snap.env[name]}" for name in PLACEBO_ENV if name in snap.env]
    if set_vars:
        return Check("DirectML env advice", "warn", f"{', '.join(set_vars)}: nothing reads this",
                     f"unset it; torch-directml reads only DML_VISIBLE_DEVICES ({_NOT_REAL})")
    if snap.directml_installed or directml_is_the_device(snap):
        return Check("DirectML env advice", "ok", f"none of {', '.join(PLACEBO_ENV)} is set (nothing reads them)")
    return None


def check_dml_visible_devices(snap: Snapshot) -> Optional[Check]:
    value = snap.env.get("DML_VISIBLE_DEVICES")
    if value is None:
        return None
    if not snap.directml_installed:
        return Check("DML_VISIBLE_DEVICES", "info", f"DML_VISIBLE_DEVICES={value}, but torch-directml is not installed")
    return Check("DML_VISIBLE_DEVICES", "info", f"DML_VISIBLE_DEVICES={value}: torch-directml sees only these adapters",
                 "unset it to see every adapter")


CHECKS: Tuple[Callable[[Snapshot], Optional[Check]], ...] = (
    check_python,
    check_torch,
    check_dependencies,
    check_directml_package,
    check_directml_torch_pin,
    check_torchvision,
    check_exact_predictions,
    check_directml_adapter_possible,
    check_directml_adapters,
    check_directml_float64,
    check_cuda,
    check_mps,
    check_xpu,
    check_scan_device,
    check_with_stack,
    check_inference_mode,
    check_bf16,
    check_autocast,
    check_float64,
    check_placebo_env,
    check_dml_visible_devices,
)


def run_checks(snap: Snapshot, checks: Sequence[Callable] = CHECKS) -> List[Check]:
    """Every check that has something to say about ``snap``, in table order.

    A check that raises is reported as a failed row rather than ending the
    doctor: the point of the command is to keep going on a broken set-up.
    """
    rows = []
    for check in checks:
        try:
            row = check(snap)
        except Exception as exc:  # a bug in one check must not hide the others
            row = Check(check.__name__.replace("check_", ""), "fail", f"the check itself failed: {exc!r}")
        if row is not None:
            rows.append(row)
    return rows


def exit_code(rows: Sequence[Check], strict: bool = False) -> int:
    """1 when a blocking check failed (or, with ``strict``, any check failed); else 0."""
    failed = [r for r in rows if r.status == "fail"]
    if any(r.blocking for r in failed) or (strict and failed):
        return 1
    return 0


# -- gathering the real snapshot -----------------------------------------------------------
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
        source_findings=find_settings(files) if files else {},
        predictor_available=_predictor_available(),
    )


def _predictor_available() -> bool:
    try:
        from dmlprof.predict import predict_scan  # noqa: F401
    except ImportError:
        return False
    return True


# -- output -------------------------------------------------------------------------
def render_table(rows: Sequence[Check]) -> str:
    """The checks as a text table plus a one-line tally."""
    from tabulate import tabulate

    table = tabulate(
        [(r.status.upper(), r.name, r.detail, r.remedy) for r in rows],
        headers=["status", "check", "detail", "remedy"],
        maxcolwidths=[None, 22, 56, 48],
    )
    return f"{table}\n\n{tally(rows)}"


def tally(rows: Sequence[Check]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    return ", ".join(f"{counts[s]} {s}" for s in STATUSES)


def to_json(rows: Sequence[Check], snap: Snapshot, strict: bool = False) -> str:
    """The checks, the exit status they give, and the snapshot they were made from."""
    from dmlprof import __version__

    return json.dumps({
        "dmlprof_version": __version__,
        "exit_code": exit_code(rows, strict),
        "checks": [dataclasses.asdict(r) for r in rows],
        "snapshot": snap.to_dict(),
    }, indent=2)
