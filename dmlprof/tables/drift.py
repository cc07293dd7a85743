"""Torch-version truth: which ops on a training step's path differ between torch 2.4.1 and a newer torch.

torch-directml 0.2.5 pins torch 2.4.1, so a DirectML user's step takes torch
2.4.1's code paths. A prediction or an emulated scan made on a newer torch
takes that torch's paths, which differ in places (since torch 2.5 attention
reaches ``aten::isneginf.out`` through ``_safe_softmax``; some composites
became kernels and the other way round). The shipped table
(``data/torch_drift.json``) is measured, not guessed: the zoo's training steps
predicted (``dmlprof scan FILE --target dml``) on torch 2.4.1 and on a newer
torch, and the ops each path reached compared.

The report asks :func:`path_drift` (pure; reads the shipped table once).
Maintainers regenerate the table with both interpreters at hand::

    python -m dmlprof.tables.drift --baseline ~/.cache/dmlprof/venv-torch2.4.1/bin/python \\
        --compare .venv/bin/python [--compare other/python ...] [tests/zoo/models ...]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

DATA_FILE = Path(__file__).resolve().parent / "data" / "torch_drift.json"
FORMAT = "dmlprof-torch-drift"
BASELINE_TORCH = "2.4.1"
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ENTRIES = (ROOT / "tests" / "zoo" / "models",)
#: The step each prediction covers: one warm-up and two measured optimizer steps, as the zoo's tests.
SCAN_ARGS = ("--target", "dml", "--warmup", "1", "--steps", "2", "--quiet")


@dataclass(frozen=True)
class DriftOp:
    """An op of a session whose presence differs from torch 2.4.1's path."""

    op: str
    reason: str          # "not_in_baseline_torch" or "not_on_baseline_path"
    seen_in: tuple       # zoo entries whose newer-torch path reached it (empty for not_in_baseline_torch)
    measured_with: str   # the newer torch the table compared, e.g. "2.13.0"

    def describe(self) -> str:
        if self.reason == "not_in_baseline_torch":
            return f"{self.op}: not an op of torch {BASELINE_TORCH}"
        where = f" (in the zoo: {', '.join(self.seen_in[:3])})" if self.seen_in else ""
        return f"{self.op}: not on torch {BASELINE_TORCH}'s path, reached on torch {self.measured_with}{where}"


def _release(version: str) -> tuple:
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts + [0] * (3 - len(parts)))


@lru_cache(maxsize=None)
def load_drift(path: Optional[str] = None) -> dict:
    """The drift table (shipped unless ``path``)."""
    data = json.loads(Path(path or DATA_FILE).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path or DATA_FILE} is not a {FORMAT} file")
    return data


def path_drift(ops: Iterable[str], torch_version: str, table: Optional[dict] = None,
               baseline_op_names=None) -> list:
    """The ops of a session (run on ``torch_version``) whose presence differs from torch 2.4.1's path.

    Empty on torch 2.4.x: its paths are torch-directml's. Otherwise, against
    the comparison measured on the nearest torch in the table, an op is listed
    when torch 2.4.1 does not define it at all (``baseline_op_names``: by
    default every aten overload in the shipped DirectML table, which was read
    against torch 2.4.1), or when some zoo training step reached it on the
    newer torch and none reached it on torch 2.4.1. Sorted by op.
    """
    if _release(torch_version)[:2] == _release(BASELINE_TORCH)[:2]:
        return []
    table = table if table is not None else load_drift()
    comparison = _nearest(table, torch_version)
    if comparison is None:
        return []
    if baseline_op_names is None:
        from dmlprof.tables import load_table

        baseline_op_names = load_table("dml")
    newer_only = comparison["not_on_baseline_path"]
    found = []
    for op in sorted(set(ops)):
        if op in newer_only:
            found.append(DriftOp(op, "not_on_baseline_path", tuple(newer_only[op]), comparison["torch"]))
        elif _is_aten(op) and op not in baseline_op_names:
            found.append(DriftOp(op, "not_in_baseline_torch", (), comparison["torch"]))
    return found


def _is_aten(op: str) -> bool:
    return op.startswith("aten::")


def _nearest(table: dict, torch_version: str) -> Optional[dict]:
    comparisons = table.get("comparisons") or []
    if not comparisons:
        return None
    wanted = _release(torch_version)
    return min(comparisons, key=lambda c: (abs(_release(c["torch"])[0] * 100 + _release(c["torch"])[1]
                                               - wanted[0] * 100 - wanted[1]), _release(c["torch"])))


def path_note(torch_version: str, differs: bool = True) -> str:
    """One line for a report: whose code paths these are (``differs``: some of this step's ops are listed)."""
    if _release(torch_version)[:2] == _release(BASELINE_TORCH)[:2]:
        return f"code paths of torch {torch_version.split('+')[0]}, the torch torch-directml 0.2.5 pins"
    head = f"code paths of torch {torch_version.split('+')[0]}; DirectML users run torch {BASELINE_TORCH} (torch-directml 0.2.5's pin)"
    if not differs:
        return head + ", where no op of this step is known to take another path (dmlprof doctor: exact predictions)"
    return head + ", whose paths differ in the ops listed (dmlprof doctor: exact predictions)"


# -- generating the table -------------------------------------------------------------------------------
def predicted_ops(python: str, entry: Path, work: Path) -> dict:
    """Ops one interpreter's ``--target dml`` prediction of ``entry`` reached: ``{"ops": [...], "error": ...}``."""
    out = work / entry.stem
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONIOENCODING="utf-8", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    done = subprocess.run([python, "-m", "dmlprof", "scan", str(entry), *SCAN_ARGS, "--out", str(out)],
                          capture_output=True, text=True, encoding="utf-8", errors="replace", env=env, cwd=str(work))
    sessions = sorted(out.glob("*.session.json"))
    error = done.stderr.strip().splitlines()[-1][:300] if done.returncode and done.stderr.strip() else None
    if not sessions:
        return {"ops": [], "error": error or f"exit code {done.returncode}, no session", "partial": True}
    session = json.loads(sessions[0].read_text(encoding="utf-8"))
    ops = session.get("ops") or {}
    reached = set(ops.get("op") or [])
    for text in ops.get("fallback_ops") or []:
        reached.update(part.rpartition("=")[0] for part in filter(None, (text or "").split(";")))
    return {"ops": sorted(reached), "error": error, "partial": bool(session["meta"].get("partial")),
            "torch": (session["meta"].get("environment") or {}).get("torch_version", "")}  # session format 2


def interpreter_torch(python: str) -> str:
    done = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"dmlprof: error: {python} cannot import torch: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout.strip().split("+")[0]


def build_table(baseline: str, compare: list, entries: list) -> dict:
    """Predict every entry on each interpreter and compare each newer torch with the baseline."""
    with tempfile.TemporaryDirectory(prefix="dmlprof-drift-") as tmp:
        work = Path(tmp)
        runs = {}
        for python in [baseline] + compare:
            version = interpreter_torch(python)
            print(f"torch {version}: predicting {len(entries)} entries", file=sys.stderr)
            runs[python] = (version, {e.stem: predicted_ops(python, e, work / version) for e in entries})
    base_version, base_runs = runs[baseline]
    baseline_reached = set().union(*(set(r["ops"]) for r in base_runs.values())) if base_runs else set()
    comparisons = []
    for python in compare:
        version, newer_runs = runs[python]
        newer_only: dict = {}
        baseline_only: dict = {}
        for name, newer in newer_runs.items():
            base = base_runs.get(name)
            if not base or base["error"] or newer["error"]:
                continue  # only steps that ran to the end on both torches are compared
            for op in set(newer["ops"]) - set(base["ops"]):
                newer_only.setdefault(op, []).append(name)
            for op in set(base["ops"]) - set(newer["ops"]):
                baseline_only.setdefault(op, []).append(name)
        comparisons.append({
            "torch": version,
            # reached on the newer torch and on no baseline step anywhere in the zoo
            "not_on_baseline_path": {op: sorted(v) for op, v in sorted(newer_only.items()) if op not in baseline_reached},
            # per entry, for reading: ops whose presence differs on that step (either way)
            "per_entry": {name: {"only_newer": sorted(op for op, v in newer_only.items() if name in v),
                                 "only_baseline": sorted(op for op, v in baseline_only.items() if name in v)}
                          for name in sorted(newer_runs)},
            "runs": {name: {"error": r["error"], "partial": r["partial"], "ops": len(r["ops"])}
                     for name, r in sorted(newer_runs.items())},
        })
    return {
        "format": FORMAT,
        "format_version": 1,
        "baseline_torch": base_version,
        "how": "dmlprof scan ENTRY " + " ".join(SCAN_ARGS) + " on each torch; ops of the predicted rows and their "
               "fallback ops; an entry counts only where both predictions ran to the end",
        "entries": [str(e.relative_to(ROOT)) if e.is_relative_to(ROOT) else str(e) for e in entries],
        "baseline_runs": {name: {"error": r["error"], "partial": r["partial"], "ops": len(r["ops"])}
                          for name, r in sorted(base_runs.items())},
        "comparisons": comparisons,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlprof.tables.drift", description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="model files to predict (default: tests/zoo/models)")
    parser.add_argument("--baseline", required=True, help="python of a venv with torch 2.4.1")
    parser.add_argument("--compare", action="append", default=[], help="python of a newer torch (repeatable; "
                        "default: this interpreter)")
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    args = parser.parse_args(argv)
    entries = sorted(p for folder in (args.folders or DEFAULT_ENTRIES) for p in Path(folder).glob("*.py")
                     if not p.name.startswith("_"))
    table = build_table(args.baseline, args.compare or [sys.executable], entries)
    args.out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    for comparison in table["comparisons"]:
        print(f"torch {comparison['torch']} vs {table['baseline_torch']}: "
              f"{len(comparison['not_on_baseline_path'])} ops reached only off torch {table['baseline_torch']}'s path; "
              f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
