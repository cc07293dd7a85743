"""The doctor's checks of the devices: can DirectML exist here, which adapters it sees and whether they
run float64, CUDA/ROCm, MPS, Intel XPU, and the device ``dmlprof scan`` will use.

Also what the other checks ask of a device (:func:`device_available`, :func:`auto_device`,
:func:`directml_is_the_device`): a setting that only fails on DirectML is worth a warning only
when the user's scans run there. All of it reads the Snapshot, never the machine: the adapter
list comes from the child-process probe :mod:`dmlprof.doctor.gather` ran.
"""
from __future__ import annotations

from typing import Optional, Tuple

from dmlprof.doctor.snapshot import Check, Snapshot, listing


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


_PREDICT = "`dmlprof scan --target dml` predicts DirectML coverage without the device"


def check_directml_adapter_possible(snap: Snapshot) -> Check:
    """Whether this OS can expose a D3D12 adapter at all, decided without asking torch-directml."""
    name = "DirectML adapter possible"
    if snap.directml_adapter_possible:
        return Check(name, "ok", snap.directml_adapter_reason or "yes")
    reason = snap.directml_adapter_reason or "no D3D12 adapter can exist here"
    if snap.wsl:
        remedy = "install the Windows GPU driver with WSL2 support, then restart WSL (wsl --shutdown)"
    elif snap.directml_os:
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
    return Check(name, "ok", listing(shown) if shown else "available", "; ".join(notes))


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
        return Check(name, "ok", f"{flavour}: {len(facts.cuda_devices)} device(s): {listing(facts.cuda_devices)}")
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
    devices = f"{len(facts.xpu_devices)} device(s): {listing(facts.xpu_devices)}"
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
