"""The doctor's checks of what the user sets: code settings known to fail on DirectML, and environment
variables that do nothing.

The settings (``with_stack=True``, ``inference_mode``, bfloat16, autocast, float64) are found by
:func:`find_settings`, plain text matching in the files the user names, which are never imported
or run; a setting warns only when the scans run on DirectML. The environment variables are the
ones DirectML advice circulates (:data:`PLACEBO_ENV`) and the one torch-directml does read
(``DML_VISIBLE_DEVICES``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from dmlprof.doctor.devices import directml_is_the_device
from dmlprof.doctor.snapshot import Check, Snapshot, listing


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
                         + (f" (used at {listing(where)})" if where else ""))
    if not on_dml:
        if where:
            return Check(setting.name, "info", f"used at {listing(where)}; {setting.failure}", setting.remedy)
        return None
    if snap.files and not where:
        return Check(setting.name, "ok", f"not used in {listing([Path(f).name for f in snap.files])}")
    if where:
        return Check(setting.name, "warn", f"used at {listing(where)}: {setting.failure}", setting.remedy)
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


#: Variables that circulate in DirectML advice but that nothing reads (not in
#: torch-directml's binaries).
PLACEBO_ENV = ("DML_GRAPH_COMPILER_OPTIONS", "DML_EXECUTION_MODE")
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
