"""What a target backend does with a call its table knows: runs it, sends it to the CPU, or raises.

The rules every target in torch's tree shares (XPU, MPS): a kernel registered on the backend's key runs on
the device; a composite kernel decomposes into other calls; an op on the backend's always-on fallback list
runs on the CPU; any other op reaches the backend's boxed fallback, which raises unless the backend's
``PYTORCH_ENABLE_*_FALLBACK`` variable is set (std::stoi of its value, so "0" is off), and then runs on the
CPU. A target module adds what is its own (dtypes, per-op dtype gaps) by overriding the hooks below.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

#: the verdict vocabulary of a call (what ``check_call`` answers)
RUNS, FALLS_BACK, RAISES = "runs", "falls back", "raises"


class TargetFailure(RuntimeError):
    """Raised in place of a call that the target's registrations say fails (predicted, never measured)."""

    kind = "raises"

    def __init__(self, message: str, op: str = "", remedy: str = ""):
        super().__init__(message)
        self.message = message
        self.op = op
        self.remedy = remedy  # what to change, where the semantics know better than "set or replace"


class TargetDtypeFailure(TargetFailure, TypeError):
    """A tensor of a dtype the device cannot hold, made on it (MPS raises a TypeError there)."""


class TargetSemantics:
    """One target's semantics over its table (a :class:`~dmlprof.tables.targets.TargetTable`)."""

    #: how users and reports name the device ("XPU")
    title = "?"
    #: the variable that turns the boxed fallback from raising into running on the CPU
    fallback_env = ""
    #: what the prediction assumes of the device beyond its registrations (said in every session)
    assumes = ""
    #: ``{op the stand-in's PrivateUse1 device calls: op ATen calls there on the target's device}``, where
    #: ATen picks a kernel by the device's type (the stand-in cannot be a device of the target's type)
    counterparts: Mapping[str, str] = {}
    #: fused ops ATen calls on a PrivateUse1 device and never on the target's, where it computes the same from
    #: ops of its own instead (``dmlprof.predict.rnn_cells.UNFUSED_PATHS``): judged as a composite, whose
    #: pieces are judged as calls of their own
    unfused: frozenset = frozenset()
    #: ``{composite op: the kernel its device-type branch calls on the target's device}``, where that kernel
    #: refuses some arguments (``argument_failure`` says which) and the stand-in's composite never calls it
    judged_composites: Mapping[str, str] = {}
    #: the dispatch key of the target's own autocast kernels ("AutocastMPS"), which the stand-in mirrors on
    #: AutocastPrivateUse1 (dmlprof.predict.autocast); None: the device has no autocast
    autocast_key: Optional[str] = None
    #: ``copy.deepcopy`` copies the device's tensors by their storage, once per deep copy, so a view and its base
    #: copied together stay a view and its base (torch's ``Tensor.__deepcopy__`` for a device with storage, XPU's);
    #: False: one ``clone()`` per tensor, views split (torch's path for MPS, XLA, meta... and torch-directml)
    deepcopy_keeps_views = False

    def __init__(self, table, environ: Optional[Mapping[str, str]] = None):
        self.table = table
        environ = os.environ if environ is None else environ
        value = environ.get(self.fallback_env, "").strip()
        self.fallback_enabled = value not in ("", "0")

    # -- the hooks a target may override ------------------------------------------------
    def refused_dtypes(self) -> dict:
        """``{dtype: () -> exception}``: dtypes no tensor on the device can hold (making one raises)."""
        return {}

    def call_failure(self, op: str, dtypes) -> Optional[str]:
        """Why a call of ``op`` (registered or composite) on tensors of ``dtypes`` raises on the device, or None."""
        return None

    def argument_failure(self, op: str, args) -> Optional[str]:
        """Why a call of the device's kernel ``op`` raises for these arguments (beyond their dtypes), or None."""
        return None

    def argument_remedy(self, op: str) -> str:
        """What to change where :meth:`argument_failure` said ``op`` raises ("": the general remedy)."""
        return ""

    def missing_message(self, op: str) -> str:
        # an op the running torch has and the table's torch does not (renamed or removed since) has no kernel
        # there either: said so, since the user's torch on the device will not have it
        absent = "" if op in self.table else f"; torch {self.table.torch_version} has no such op"
        return (f"The operator '{op}' is not implemented for the {self.title} device in torch "
                f"{self.table.torch_version} (predicted from its registrations{absent}); set {self.fallback_env}=1 "
                "to run it on the CPU")

    # -- what follows from them ---------------------------------------------------------------
    def kind(self, op: str) -> Optional[str]:
        """The table's kind of ``op``, or of the op the target's device calls in its place."""
        if op in self.unfused:
            return "composite_implicit"  # the device runs its unfused pieces
        return self.table.kind(self.counterparts.get(op, op))

    def stand_in_natives(self) -> tuple:
        """The stand-in's ops whose counterparts are the target's own kernels."""
        return tuple(op for op, theirs in self.counterparts.items() if self.table.kind(theirs) == "native")

    def fallback_failure(self, op: str) -> Optional[str]:
        """Why ``op``, which has no kernel of the backend's nor a composite one, raises; None where it
        runs on the CPU (always-on fallback list, or the fallback variable set)."""
        if op in self.table.cpu_fallback or self.fallback_enabled:
            return None
        return self.missing_message(op)

    def check_call(self, op: str, dtypes=()) -> str:
        """``RUNS``, ``FALLS_BACK`` or ``RAISES`` for one call, from the table alone (no torch dispatcher:
        an op the table does not know is judged as the backend's boxed fallback would judge it)."""
        kind = self.kind(op)
        if kind == "native":
            return RAISES if self.call_failure(op, dtypes) else RUNS
        if kind in ("composite_explicit", "composite_implicit"):
            return RUNS  # decomposes: its pieces are judged as calls of their own
        return RAISES if self.fallback_failure(op) else FALLS_BACK

    def setting(self) -> str:
        """The setting the prediction assumed, in words."""
        state = "set" if self.fallback_enabled else "unset"
        then = "an op the device lacks runs on the CPU" if self.fallback_enabled else "an op the device lacks raises"
        return f"{self.fallback_env} {state} ({then})"

    def provenance(self) -> str:
        """What every verdict of this target rests on (one sentence for the session's notes)."""
        outside = sorted(set(self.table.doc.get("registered_outside_yaml", {}).values()))
        return (f"--target {self.table.backend}: verdicts read from {self.table.version_label()}: "
                f"{self.table.source.get('registrations')}"
                + (f"; registrations outside it from {'; '.join(outside)}" if outside else "")
                + "; always-on CPU fallbacks from "
                + f"{self.table.source.get('fallback_list')}; assumed {self.setting()}"
                + (f"; {self.assumes}" if self.assumes else ""))

    def remedy(self, op: str) -> str:
        """What to change where ``op`` raises."""
        if self.kind(op) in (None, "missing", "fallback"):
            return f"set {self.fallback_env}=1 (it then runs on the CPU), or replace {op} in the model"
        return f"change the dtype of {op}'s inputs, or replace {op} in the model"


__all__ = ["TargetSemantics", "TargetFailure", "TargetDtypeFailure", "RUNS", "FALLS_BACK", "RAISES"]
