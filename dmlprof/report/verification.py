"""``scan --verify``'s findings as the report holds them (docs/verify.md): per op, per parameter, and
what was not compared. Built by :mod:`dmlprof.report.build`, shown by every renderer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple


@dataclass(frozen=True)
class DivergentOp:
    """Calls of one op, at one place, whose device result differed from the CPU's."""

    op: str
    module: str
    source: str
    what: str
    calls: int
    reason: str
    max_abs_error: Optional[float]
    max_rel_error: Optional[float]
    phase: str
    first_step: Optional[int]
    input_shapes: Tuple[Tuple[int, ...], ...]
    input_dtypes: Tuple[str, ...]
    output_shape: Tuple[int, ...]
    output_dtype: str
    mismatched: int
    numel: int
    rtol: Optional[float]
    atol: Optional[float]


@dataclass(frozen=True)
class LostUpdate:
    """A parameter that optimizer.step() left unchanged although its gradient was non-zero."""

    parameter: str
    optimizer: str
    steps: int
    shape: Tuple[int, ...]
    dtype: str
    max_abs_grad: float
    lr: Optional[float]


@dataclass(frozen=True)
class Unchecked:
    """Calls the verifier did not compare, for one reason."""

    reason: str
    calls: int
    ops: Tuple[str, ...]  # most calls first


@dataclass(frozen=True)
class Verification:
    """``scan --verify``'s findings, grouped per op and per parameter (docs/verify.md)."""

    clean: bool
    headline: str
    checked_calls: int
    checked_ops: int
    divergent_calls: int
    divergent_ops: Tuple[DivergentOp, ...]
    lost_updates: Tuple[LostUpdate, ...]
    optimizer_steps: int
    parameters_checked: int
    skipped_calls: int
    skipped: Tuple[Unchecked, ...]
    tolerances: Mapping[str, Any]
    notes: Tuple[str, ...]
