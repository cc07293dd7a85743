"""A prediction held against real torch-directml, call signature by call signature (``scan --confirm``).

Each row is one distinct call signature of the predicted step (op, dtypes, shapes, strides, scalar
arguments): what the prediction said (device, fallback, raises, aborts; wrong or not) and what real
torch-directml did with the same call (:mod:`dmlprof.confirm`), and whether the two agree. Torch-free data:
the terminal and the JSON format it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

CONFIRMED, CONTRADICTED = "confirmed", "contradicted"
#: what real torch-directml did with a call (the supervisor's outcomes, ``device_lost``: the device was removed)
REAL_OUTCOMES = ("device", "fallback", "raises", "aborts", "device_lost", "hangs", "harness_error", "not_measured")


@dataclass(frozen=True)
class ConfirmationRow:
    op: str
    dtypes: str
    shapes: str
    calls: int  # calls of the step with this signature
    phase: str
    module: str
    source: str
    predicted: str  # device | fallback | raises | aborts
    predicted_wrong: bool
    real: str  # one of REAL_OUTCOMES
    real_wrong: Optional[bool]  # None: values not compared (random, uninitialised, a view, or it did not run)
    max_abs_error: Optional[float] = None
    detail: str = ""  # the error message, the fallback ops, why values were not compared

    @property
    def status(self) -> str:
        same_verdict = self.predicted == self.real
        same_values = self.real_wrong is None or self.real_wrong == self.predicted_wrong
        return CONFIRMED if same_verdict and same_values else CONTRADICTED

    @property
    def real_words(self) -> str:
        if self.real_wrong:
            error = f" (max error {self.max_abs_error:.3g})" if isinstance(self.max_abs_error, (int, float)) else ""
            return f"{self.real}, wrong{error}"
        return self.real

    @property
    def predicted_words(self) -> str:
        return f"{self.predicted}, wrong" if self.predicted_wrong else self.predicted

    def to_dict(self) -> dict:
        return {"op": self.op, "dtypes": self.dtypes, "shapes": self.shapes, "calls": self.calls, "phase": self.phase,
                "module": self.module, "source": self.source, "predicted": self.predicted,
                "predicted_wrong": self.predicted_wrong, "real": self.real, "real_wrong": self.real_wrong,
                "max_abs_error": self.max_abs_error, "detail": self.detail, "status": self.status}


@dataclass(frozen=True)
class Confirmation:
    model: str
    adapter: str
    rows: Tuple[ConfirmationRow, ...]
    seconds: float
    workers: int
    #: ops whose calls could not be replayed (an argument no worker can rebuild), with why
    unreplayable: Tuple[Tuple[str, str], ...] = field(default=())

    @property
    def contradicted(self) -> Tuple[ConfirmationRow, ...]:
        return tuple(row for row in self.rows if row.status == CONTRADICTED)

    @property
    def headline(self) -> str:
        n, bad = len(self.rows), len(self.contradicted)
        where = f"real torch-directml ({self.adapter})" if self.adapter else "real torch-directml"
        if not bad:
            return f"all {n} call signatures of the predicted step confirmed on {where}"
        return f"{bad} of {n} call signatures of the predicted step contradicted on {where}"

    def to_dict(self) -> dict:
        return {"format": "dmlprof-confirmation", "version": 1, "model": self.model, "adapter": self.adapter,
                "headline": self.headline, "signatures": len(self.rows), "contradicted": len(self.contradicted),
                "seconds": round(self.seconds, 1), "workers": self.workers,
                "unreplayable": [{"op": op, "why": why} for op, why in self.unreplayable],
                "rows": [row.to_dict() for row in self.rows]}
