"""Op tables: per aten overload, which kernel a backend's dispatch key resolves to.

Kinds: ``native`` (the backend registered its own kernel), ``fallback`` (the
backend's boxed fallback, which for DirectML copies to the CPU and runs the CPU
kernel), ``composite_explicit`` and ``composite_implicit`` (torch's generic
kernels, which call other ops; what those reach decides where the work runs).

The DirectML table is read from the real torch-directml package by
``python -m dmlprof.tables.extract dml`` and shipped as versioned data; live
tables for any installed backend are read from the running dispatcher.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Optional

from dmlprof.errors import UsageError

KINDS = ("native", "fallback", "composite_explicit", "composite_implicit")
#: only in live tables of a key with no backend fallback: calling the op raises
MISSING = "missing"
DATA_DIR = Path(__file__).resolve().parent / "data"
# Shipped data file per backend name.
SHIPPED = {"dml": "torch_directml-0.2.5.dev240914.json"}
MEANINGS = {
    "native": "runs a kernel the backend registered itself: it stays on the device",
    "fallback": "has no kernel of its own on this backend: the boxed fallback copies its tensors to the CPU, "
                "runs the CPU kernel and copies the results back",
    "composite_explicit": "runs torch's generic kernel, which calls other ops; where it runs depends on what those reach",
    "composite_implicit": "decomposes into other ops above the backend (autograd sees the pieces); "
                          "where it runs depends on those ops",
    MISSING: "has no kernel and no fallback on this backend: calling it raises NotImplementedError",
}


class OpTable:
    """One backend's op table (see the module docstring for the kinds)."""

    def __init__(self, *, backend: str, package: str, package_version: str, torch_version: str,
                 dispatch_key: str, ops: dict, registrations: Optional[dict] = None, source: str = "shipped",
                 counts: Optional[dict] = None):
        self.backend = backend
        self.package = package
        self.package_version = package_version
        self.torch_version = torch_version
        self.dispatch_key = dispatch_key
        self.source = source
        self._ops = dict(ops)
        self.registrations = dict(registrations or {})
        if counts is None:
            counts = {kind: 0 for kind in KINDS}
            for kind in self._ops.values():
                counts[kind] = counts.get(kind, 0) + 1
        self.counts = dict(counts)

    @classmethod
    def from_document(cls, doc: dict, source: str = "shipped") -> "OpTable":
        if doc.get("format") != "dmlprof-op-table" or doc.get("format_version") != 1:
            raise UsageError("not a dmlprof op table (format dmlprof-op-table, version 1)")
        return cls(backend=doc["backend"], package=doc["package"], package_version=doc["package_version"],
                   torch_version=doc["torch_version"], dispatch_key=doc["dispatch_key"], ops=doc["ops"],
                   registrations=doc.get("registrations"), counts=doc.get("counts"), source=source)

    def kind(self, op: str) -> Optional[str]:
        """The op's kind, or ``None`` when the table does not know the op (any spelling)."""
        return self._ops.get(normalize_op(op))

    def ops(self, kind: Optional[str] = None) -> list:
        """Sorted op names, all or those of one kind."""
        if kind is None:
            return sorted(self._ops)
        return sorted(op for op, k in self._ops.items() if k == kind)

    def __contains__(self, op) -> bool:
        return isinstance(op, str) and normalize_op(op) in self._ops

    def __len__(self) -> int:
        return len(self._ops)

    def reaches(self, op: str) -> tuple:
        """The ops a composite computes with, followed by torch's naming until one that is not composite:
        ``((op, how), ...)`` after ``op`` itself, ``how`` saying why each follows the one before. Empty for
        an op that is not composite, or whose next op the names do not tell.

        Two conventions of torch's, which hold for its structured kernels: a ``_foreach_`` op loops over
        the tensors calling the per-tensor op (``_foreach_lerp_.Scalar`` -> ``lerp_.Scalar``), and a
        functional or in-place op computes with its ``out=`` form (``lerp_.Scalar`` -> ``lerp.Scalar_out``,
        ``add_.Tensor`` -> ``add.out``). ``_foreach_lerp_.Scalar`` so reaches ``lerp.Scalar_out``, which
        falls back on DirectML once per parameter. A scan (``--target dml``) shows what a model reaches.
        """
        path, current = [], normalize_op(op)
        while self.kind(current) in _FOLLOWED and len(path) < _MAX_REACH:
            found = _next_op(self, current)
            if found is None or found[0] == current:
                break
            path.append(found)
            current = found[0]
        return tuple(path)

    def version_label(self) -> str:
        """E.g. ``torch-directml 0.2.5.dev240914 (read against torch 2.4.1)``."""
        if self.source == "live":
            return f"{self.package} (live, torch {self.torch_version})"
        return f"{self.package} {self.package_version} (read against torch {self.torch_version})"

    def __repr__(self) -> str:
        return f"<OpTable {self.backend}: {self.version_label()}, {len(self)} ops>"


#: kinds whose ops are followed to what they compute with (implicit ones decompose above the backend: their
#: pieces are many, and a scan shows them)
_FOLLOWED = ("composite_explicit",)
_MAX_REACH = 4
#: a ``_foreach_`` overload's per-tensor overload: a list of tensors or scalars is one of each per call
_PER_TENSOR = {"List": "Tensor", "ScalarList": "Scalar"}


def _next_op(table: OpTable, op: str) -> Optional[tuple]:
    """What ``op``'s generic kernel calls by torch's naming (see :meth:`OpTable.reaches`), or None."""
    namespace, rest = op.split("::", 1)
    name, _, overload = rest.partition(".")
    if overload == "out" or overload.endswith("_out"):
        return None  # already the out= form: what it calls is not in its name
    if name.startswith("_foreach_"):
        base, per_tensor = name[len("_foreach_"):], _PER_TENSOR.get(overload, overload)
        candidates = [f"{base}.{per_tensor}" if per_tensor else base, base]
        how = "one call per tensor"
    else:
        base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
        # the Tensor overload's out= form is plain .out (add.out, div.out); others add _out (lerp.Scalar_out)
        candidates = [f"{base}.{overload}_out"] + ([f"{base}.out"] if overload in ("", "Tensor") else [])
        how = "its out= form"
    for candidate in candidates:
        full = f"{namespace}::{candidate}"
        if full != op and full in table:
            return full, how
    return None


def normalize_op(name: str) -> str:
    """Dispatcher spelling for ``aten::x.ov``, ``aten.x.ov``, ``x.ov``, ``torch.ops.aten.x.ov``, ``x.default``."""
    name = name.strip()
    if name.startswith("torch.ops."):
        name = name[len("torch.ops."):]
    if "::" in name:
        namespace, rest = name.split("::", 1)
    else:
        namespace, dot, rest = name.partition(".")
        if not dot or namespace not in _NAMESPACES:
            namespace, rest = "aten", name
    if rest.endswith(".default"):  # OpOverload's name for the unnamed overload
        rest = rest[: -len(".default")]
    return f"{namespace}::{rest}"


_NAMESPACES = {"aten", "prims", "torchvision", "quantized", "c10d", "_c10d_functional"}


@lru_cache(maxsize=None)
def load_table(backend: str = "dml") -> OpTable:
    """The shipped table for ``backend`` (cached)."""
    try:
        filename = SHIPPED[backend]
    except KeyError:
        raise UsageError(f"no shipped op table for {backend!r}; shipped: {', '.join(sorted(SHIPPED))}") from None
    with open(DATA_DIR / filename, encoding="utf-8") as fh:
        return OpTable.from_document(json.load(fh), source="shipped")


# Which package provides each dispatch key's kernels, for labels.
_KEY_PACKAGES = {"MPS": "torch (MPS)", "XPU": "torch (XPU)", "CUDA": "torch (CUDA)", "CPU": "torch (CPU)"}


def live_table(dispatch_key: str = "PrivateUse1") -> OpTable:
    """The table of ``dispatch_key`` read from this process's dispatcher (import the backend first)."""
    import torch

    from dmlprof.tables._dispatch_read import read_dispatch_table, registrations

    if not hasattr(torch._C.DispatchKey, dispatch_key):
        raise UsageError(f"unknown dispatch key {dispatch_key!r}")
    reading = read_dispatch_table(dispatch_key)
    if dispatch_key == "PrivateUse1":
        package = f"torch ({torch._C._get_privateuse1_backend_name()})"
    else:
        package = _KEY_PACKAGES.get(dispatch_key, f"torch ({dispatch_key})")
    regs = {key: registrations(key) for key in (dispatch_key, "Autograd" + dispatch_key)
            if hasattr(torch._C.DispatchKey, key)}
    version = torch.__version__.split("+")[0]
    return OpTable(backend=dispatch_key.lower(), package=package, package_version=version, torch_version=version,
                   dispatch_key=dispatch_key, ops=reading["ops"], registrations=regs, source="live")


__all__ = ["KINDS", "MISSING", "MEANINGS", "OpTable", "load_table", "live_table", "normalize_op"]
