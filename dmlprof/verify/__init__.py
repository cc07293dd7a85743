"""``scan --verify``: every device op recomputed on the CPU, and optimizer updates that never land.

:class:`Verifier` does the live check (the recorder calls it per op);
:func:`summary` turns a session's ``extras['verify']`` into what the
terminal, JSON and HTML reports show. Tolerances: :mod:`dmlprof.verify.tolerance`
and docs/verify.md.
"""
from __future__ import annotations

from dmlprof.verify.tolerance import TOLERANCES, compare, tolerance_for
from dmlprof.verify.verifier import Verifier
from dmlprof.verify.report import summary, verdict_line

__all__ = ["TOLERANCES", "Verifier", "compare", "summary", "tolerance_for", "verdict_line"]
