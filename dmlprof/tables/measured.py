"""What the real torch-directml did with each op: the truth table measured on real DirectML.

``tools/realdml/measure_truth.py`` runs PyTorch's OpInfo samples on the real torch-directml
(realdml: vkd3d-proton and lavapipe, docs/realdml.md) and ``ship_truth.py`` keeps, per op overload and
dtype, how its calls went: on the device, fallen back, raised, ended the process, and whether the
device's results differed from the CPU's (and by how much). Torch-free: the report reads it to flag
calls of ops whose results are known to be wrong on DirectML.

Provenance matters: this stack is DirectML on a software Vulkan driver, and a translation layer can
err where DirectML does not. A wrong result counts as DirectML's (``confirmed``) only where a report
from real hardware says so (:data:`CONFIRMED`); otherwise it is shown as unconfirmed, never as a fact
about DirectML.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from dmlprof.tables import DATA_DIR, normalize_op

SHIPPED = {"dml": "torch_directml-0.2.5.dev240914.measured.json"}
FORMAT = "dmlprof-measured-table"

#: wrong results confirmed on real GPUs, by op (any overload): where it was reported
CONFIRMED = {
    "aten::upsample_bilinear2d": "microsoft/DirectML#482 (bilinear interpolate wrong on real GPUs)",
    "aten::upsample_bilinear2d_backward": "microsoft/DirectML#482 (bilinear interpolate wrong on real GPUs)",
}


@dataclass(frozen=True)
class WrongResults:
    """An op whose device results differed from the CPU's on real DirectML, in the table's samples."""

    op: str
    dtype: str
    wrong_calls: int
    calls: int
    max_abs_error: Optional[float]
    max_rel_error: Optional[float]
    samples: tuple
    #: where it was confirmed on real hardware; "" when seen on realdml only (unconfirmed)
    confirmed_by: str = ""
    #: what differed, in words ("values differ beyond tolerance", "dtype bool on the device, float32 on the CPU")
    reason: str = ""


@dataclass(frozen=True)
class Evidence:
    """How one entry was measured. ``generator`` 1: the first table (values seen under dmlprof's recorder, in
    one shared process, all-ones incoming gradients); 2: values judged from a run nothing intercepted, random
    incoming gradients, a device health probe after each device run (tools/realdml/truth_supervisor.py)."""

    generator: int
    adapter: str = ""
    #: completed samples with a call of this entry, and how many of them a passing health probe followed
    samples: int = 0
    probed: int = 0
    #: samples of this entry that ended the process, and that removed the device at its call
    ended_process: int = 0
    device_lost: int = 0
    #: "whole" (every sample re-measured), "part", or "" (measured so in the first place)
    remeasured: str = ""
    date: str = ""


class MeasuredTable:
    """The measured truth of one backend (see the module docstring)."""

    def __init__(self, document: dict):
        self.document = document
        self.package = document.get("package", "")
        self.package_version = document.get("package_version", "")
        self.torch_version = document.get("torch_version", "")
        self.date = document.get("date", "")
        self.versions = dict(document.get("versions") or {})
        self._ops = document.get("ops") or {}

    def label(self) -> str:
        v = self.versions
        return (f"{self.package} {self.package_version} on torch {self.torch_version}, measured {self.date} on "
                f"vkd3d-proton {v.get('vkd3d_proton', '?')} + Mesa {v.get('mesa', '?')}")

    def entry(self, op: str, dtypes: str) -> Optional[dict]:
        """How calls of ``op`` with these dtypes (as the op frame names them: ``bool,float32``) went."""
        return (self._ops.get(normalize_op(op)) or {}).get(dtypes)

    def evidence(self, op: str, dtypes: str) -> Optional[Evidence]:
        """How the entry of ``op`` with these dtypes was measured (None when the table has no such entry).
        Entries without a ``measured`` record are generator 1's (format 1 files)."""
        e = self.entry(op, dtypes)
        if e is None:
            return None
        m = e.get("measured") or {}
        # generator 1 measured every entry on the one adapter the table's versions name
        adapter = m.get("adapter") or (f"vkd3d-proton {self.versions['vkd3d_proton']} + Mesa {self.versions['mesa']}"
                                       if self.versions.get("mesa") else "")
        return Evidence(int(m.get("generator", 1)), str(adapter), int(m.get("samples", 0)),
                        int(m.get("probed", 0)), int(m.get("ended_process", 0)), int(e.get("device_lost", 0)),
                        str(m.get("remeasured", "")), str(m.get("date", self.date)))

    def wrong_results(self, op: str, dtypes: str) -> Optional[WrongResults]:
        """``op`` with these dtypes, where its results were wrong on real DirectML: confirmed on real hardware,
        or in more than half of the measured calls (a share below that is an input the table's samples hit
        and a user's calls may not, and is not flagged); else None."""
        name = normalize_op(op)
        e = self.entry(name, dtypes)
        if not e or not e.get("wrong"):
            return None
        confirmed = CONFIRMED.get(name.split(".", 1)[0], "")
        if not confirmed and 2 * e["wrong"] <= max(e.get("calls", 0), e["wrong"]):
            return None
        reasons = [m for m in e.get("messages") or () if "differ" in m or " on the device, " in m]
        return WrongResults(name, dtypes, e["wrong"], e.get("calls", 0), e.get("max_abs_error"),
                            e.get("max_rel_error"), tuple(e.get("samples") or ()), confirmed, reasons[0] if reasons else "")

    def flagged_ops(self) -> frozenset:
        """Every op some dtypes of which :meth:`wrong_results` flags (for a hot path: a set lookup)."""
        return frozenset(op for op, by_dtype in self._ops.items()
                         if any(self.wrong_results(op, dtypes) is not None for dtypes in by_dtype))

    def ops_with_wrong_results(self) -> list:
        return sorted(op for op, by_dtype in self._ops.items() if any(e.get("wrong") for e in by_dtype.values()))


@lru_cache(maxsize=None)
def load_measured(backend: str = "dml") -> Optional[MeasuredTable]:
    """The shipped measured table of ``backend`` (None when there is none, or it is missing or damaged: then a
    one-line note on stderr, once a process, says that known wrong results go unflagged)."""
    table, problem = _read_measured(backend)
    if problem:
        print(f"dmlprof: note: {problem}", file=sys.stderr)
    return table


def measured_table_problem(backend: str = "dml") -> str:
    """Why the shipped measured table of ``backend`` cannot be read ("" when it reads, or none is shipped)."""
    return _read_measured(backend)[1]


def _read_measured(backend: str):
    name = SHIPPED.get(backend)
    if name is None:
        return None, ""
    unflagged = "calls of ops known to give wrong results there are not flagged (reinstall dmlprof)"
    try:
        document = json.loads((DATA_DIR / name).read_text(encoding="utf-8"))
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError("not a measured table")
        ops = document.get("ops")
        if not isinstance(ops, dict) or not all(isinstance(by_dtype, dict) and all(isinstance(e, dict) for e in
                                                                                    by_dtype.values())
                                                for by_dtype in ops.values()):
            raise ValueError("its ops are not a table of op, dtypes and counts")
        table = MeasuredTable(document)
        table.flagged_ops()  # every entry read once, here: a damaged one fails now, not inside a scan or report
        return table, ""
    except FileNotFoundError:
        return None, f"the table of results measured on the device ({name}) is missing: {unflagged}"
    except (OSError, ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        return None, f"the table of results measured on the device ({name}) is damaged ({reason}): {unflagged}"
