"""``scan --verify``: every device op recomputed on the CPU, and optimizer updates that never land.

:class:`Verifier` does the live check (the recorder calls it per op). What the
reports show of its findings is computed by :mod:`dmlprof.analysis.verification`
(torch-free, so re-rendering a saved session never imports torch). Tolerances:
:mod:`dmlprof.verify.tolerance` and docs/verify.md.
"""
from __future__ import annotations

from dmlprof.verify.tolerance import TOLERANCES, compare, tolerance_for
from dmlprof.verify.verifier import Verifier

__all__ = ["TOLERANCES", "Verifier", "compare", "tolerance_for"]
