"""Extract a backend's op table from the real package: ``python -m dmlprof.tables.extract dml``.

Creates (or reuses) a venv holding exactly the torch and backend versions the
table is for, imports the backend there in a child process (on Linux with
``LD_LIBRARY_PATH`` naming torch-directml's stub D3D12 libraries, and never
touching device enumeration, which crashes without an adapter), reads which
kernel the backend's dispatch key resolves to for every aten overload, and
writes the versioned data file shipped in ``dmlprof/tables/data/``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from dmlprof.errors import DmlprofError

DATA_DIR = Path(__file__).resolve().parent / "data"
READER = Path(__file__).resolve().parent / "_dispatch_read.py"
KINDS = ("native", "fallback", "composite_explicit", "composite_implicit")

SPECS = {
    "dml": {
        "package": "torch-directml",
        "package_version": "0.2.5.dev240914",
        "module": "torch_directml",
        "torch_version": "2.4.1",
        "dispatch_key": "PrivateUse1",
        "requirements": ["torch==2.4.1", "torch-directml==0.2.5.dev240914", "numpy<2"],
        # The package's own folder holds stub libd3d12/libdxcore that the
        # loader must find at process start (preloading does not work).
        "library_dir_from_package": True,
    },
}


class ExtractError(DmlprofError):
    """The extraction venv or the child reading the dispatcher failed."""


def default_venv(spec: dict) -> Path:
    return Path.home() / ".cache" / "dmlprof" / f"venv-torch{spec['torch_version']}"


def venv_python(venv: Path) -> Path:
    """The interpreter inside ``venv`` (Scripts\\python.exe on Windows)."""
    if os.name == "nt":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)


def _venv_has(python: Path, spec: dict) -> bool:
    probe = (
        "import sys, importlib.util, importlib.metadata as m, torch\n"
        f"ok = torch.__version__.split('+')[0] == {spec['torch_version']!r}\n"
        f"ok = ok and m.version({spec['package']!r}) == {spec['package_version']!r}\n"
        "sys.exit(0 if ok else 1)\n"
    )
    return python.exists() and _run([python, "-c", probe]).returncode == 0


def ensure_venv(spec: dict, venv: Path, log=print) -> Path:
    """Create or reuse ``venv`` with the spec's exact versions; returns its python."""
    python = venv_python(venv)
    if _venv_has(python, spec):
        return python
    if not python.exists():
        log(f"creating venv {venv}")
        done = _run([sys.executable, "-m", "venv", venv])
        if done.returncode != 0:
            raise ExtractError(f"could not create venv {venv}: {done.stderr.strip()[-300:]}")
    log(f"installing {' '.join(spec['requirements'])} into {venv} (large download)")
    done = _run([python, "-m", "pip", "install", "-q", *spec["requirements"]])
    if done.returncode != 0 or not _venv_has(python, spec):
        raise ExtractError(f"could not install {spec['package']} {spec['package_version']}: {done.stderr.strip()[-300:]}")
    return python


def child_env(python: Path, spec: dict) -> dict:
    env = dict(os.environ)
    if spec.get("library_dir_from_package") and sys.platform.startswith("linux"):
        # find_spec locates the package without executing it.
        done = _run([python, "-c", (
            "import importlib.util; "
            f"print(list(importlib.util.find_spec({spec['module']!r}).submodule_search_locations)[0])"
        )])
        if done.returncode != 0:
            raise ExtractError(f"{spec['module']} is not importable in the venv: {done.stderr.strip()[-300:]}")
        folder = done.stdout.strip()
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [folder, env.get("LD_LIBRARY_PATH")]))
    return env


def read_in_venv(python: Path, spec: dict) -> dict:
    """Run the dispatcher reader in the venv; returns its parsed JSON."""
    done = _run([python, "-I", READER, spec["module"], spec["dispatch_key"]], env=child_env(python, spec), timeout=600)
    if done.returncode != 0:
        raise ExtractError(f"reading the dispatcher failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout)


def build_document(backend: str, spec: dict, reading: dict) -> dict:
    ops = {op: kind for op, kind in sorted(reading["ops"].items())}
    counts = Counter(ops.values())
    return {
        "format": "dmlprof-op-table",
        "format_version": 1,
        "backend": backend,
        "package": spec["package"],
        "package_version": spec["package_version"],
        "torch_version": reading["torch_version"],
        "dispatch_key": spec["dispatch_key"],
        "extracted_with": f"python -m dmlprof.tables.extract {backend}",
        # The four kinds always, in their fixed order; anything else (ops with no kernel) after.
        "counts": {**{kind: counts.get(kind, 0) for kind in KINDS},
                   **{kind: n for kind, n in sorted(counts.items()) if kind not in KINDS}},
        "registrations": reading["registrations"],
        "ops": ops,
    }


def output_path(spec: dict) -> Path:
    return DATA_DIR / f"{spec['module']}-{spec['package_version']}.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlprof.tables.extract", description=__doc__.splitlines()[0])
    parser.add_argument("backend", choices=sorted(SPECS))
    parser.add_argument("--venv", type=Path, help="venv to create or reuse (default ~/.cache/dmlprof/venv-torch<version>)")
    parser.add_argument("--out", type=Path, help="where to write the table (default: the shipped data file)")
    args = parser.parse_args(argv)
    spec = SPECS[args.backend]
    try:
        python = ensure_venv(spec, args.venv or default_venv(spec))
        reading = read_in_venv(python, spec)
    except (ExtractError, subprocess.TimeoutExpired, ValueError) as err:
        print(f"dmlprof: error: {err}", file=sys.stderr)
        return 2
    if reading["disagreements"]:
        # The dump's tag and the registration queries must tell the same story.
        print(f"dmlprof: error: {len(reading['disagreements'])} ops read differently by the two methods, "
              f"e.g. {reading['disagreements'][:3]}", file=sys.stderr)
        return 2
    doc = build_document(args.backend, spec, reading)
    out = args.out or output_path(spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    regs = ", ".join(f"{k} {len(v)}" for k, v in doc["registrations"].items())
    print(f"{out}: {sum(doc['counts'].values())} aten overloads read against torch {doc['torch_version']}")
    print("  " + ", ".join(f"{k} {v}" for k, v in doc["counts"].items()) + f"; registrations: {regs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
