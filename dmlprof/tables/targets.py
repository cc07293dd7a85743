"""The tables ``--target xpu`` and ``--target mps`` predict from: a torch wheel's own registrations, not measurements.

One file per target and torch version in ``data/targets/`` (``<target>-torch<version>.json``, written by
``tools/target_tables.py``), each saying what it was read from. A target is known by its file: this module
names none (docs/targets.md).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional

from dmlprof.errors import UsageError

TARGET_DIR = Path(__file__).resolve().parent / "data" / "targets"
_FILE = re.compile(r"^(?P<target>[a-z0-9_]+)-torch(?P<version>[0-9][0-9.]*)\.json$")


def _version_key(version: str) -> tuple:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def shipped_target_tables() -> dict:
    """``{target: (torch versions, oldest first)}`` of the shipped tables."""
    found: dict = {}
    for path in sorted(TARGET_DIR.glob("*.json")):
        match = _FILE.match(path.name)
        if match:
            found.setdefault(match.group("target"), []).append(match.group("version"))
    return {target: tuple(sorted(versions, key=_version_key)) for target, versions in sorted(found.items())}


class TargetTable:
    """One target's ops as one torch version registers them (kinds: ``native``, ``fallback`` (always sent to
    the CPU), ``composite_explicit``, ``composite_implicit``, ``missing`` (the backend's fallback decides))."""

    def __init__(self, doc: dict):
        if doc.get("format") != "dmlprof-target-table" or doc.get("format_version") != 1:
            raise UsageError("not a dmlprof target table (format dmlprof-target-table, version 1)")
        self.doc = doc
        self.backend = doc["target"]
        self.dispatch_key = doc["dispatch_key"]
        self.torch_version = doc["torch_version"]
        self.package = f"torch ({self.dispatch_key})"
        self.package_version = self.torch_version
        self.source = dict(doc["source"])
        self._ops = dict(doc["ops"])
        self.cpu_fallback = frozenset(doc.get("cpu_fallback", ()))
        self.dtypes = dict(doc.get("dtypes") or {})
        self.counts = dict(doc.get("counts") or {})
        #: the stand-in registers its own kernels where the target does (as ``OpTable.registrations``)
        self.registrations = {"PrivateUse1": tuple(op for op, kind in self._ops.items() if kind == "native")}

    def kind(self, op: str) -> Optional[str]:
        return self._ops.get(op)

    def ops(self, kind: Optional[str] = None) -> list:
        return sorted(op for op, k in self._ops.items() if kind is None or k == kind)

    def __contains__(self, op) -> bool:
        return op in self._ops

    def version_label(self) -> str:
        """E.g. ``torch 2.14.1's XPU registrations (read, not measured)``; the sources are in ``source``."""
        return f"torch {self.torch_version}'s {self.dispatch_key} registrations (read, not measured)"

    def __repr__(self) -> str:
        return f"<TargetTable {self.backend}: {self.version_label()}, {len(self._ops)} ops>"


@lru_cache(maxsize=None)
def load_target_table(target: str, torch_version: Optional[str] = None) -> TargetTable:
    """The shipped table of ``target`` for ``torch_version`` (None: the newest shipped); raises UsageError."""
    shipped = shipped_target_tables()
    if target not in shipped:
        raise UsageError(f"no target table for {target!r}; shipped: {', '.join(shipped) or 'none'}")
    versions = shipped[target]
    version = torch_version or versions[-1]
    if version not in versions:
        raise UsageError(f"no {target} table for torch {version}; shipped: {', '.join(versions)}")
    with open(TARGET_DIR / f"{target}-torch{version}.json", encoding="utf-8") as fh:
        return TargetTable(json.load(fh))


__all__ = ["TargetTable", "load_target_table", "shipped_target_tables", "TARGET_DIR"]
