"""The doctor's checks of the interpreter and the packages: Python, torch, dmlprof's dependencies,
torch-directml and the torch and torchvision releases it pins, and whose code paths a prediction follows.

Most DirectML set-ups that fail, fail here, before any device is asked: torch-directml's native
module loads only into the one torch release it was built against, and that torch publishes
wheels for a few Pythons only. The version reading these checks share (:func:`release`,
:func:`exact_pins`, :func:`torchvision_for`) sits at the end.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, Optional, Sequence, Tuple

from dmlprof.doctor.snapshot import Check, Snapshot

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


def check_python(snap: Snapshot) -> Check:
    version = _fmt_python(snap.python_version)
    if tuple(snap.python_version[:2]) < MIN_PYTHON:
        return Check("python", "fail", f"Python {version}; dmlprof needs {_fmt_python(MIN_PYTHON)} or newer",
                     f"use Python {_fmt_python(MIN_PYTHON)} to {_fmt_python(DIRECTML_MAX_PYTHON)}", blocking=True)
    if snap.directml_os and tuple(snap.python_version[:2]) > DIRECTML_MAX_PYTHON:
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
                 f"for DirectML (Windows or WSL2): {DIRECTML_INSTALL}" if snap.directml_os else "")


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


def check_measured_table(snap: Snapshot) -> Optional[Check]:
    """The shipped table of results measured on real DirectML: without it, known wrong results go unflagged."""
    if not snap.measured_table_problem:
        return None
    return Check("measured results", "warn", snap.measured_table_problem,
                 "pip install --force-reinstall dmlprof (or, from a checkout, git checkout dmlprof/tables/data)")


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
