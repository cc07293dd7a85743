"""The report value: :func:`build_report` turns a Session into a :class:`Report`, computed once.

Between the Session (data) and the renderers (formatting): the terminal, the
JSON file, the HTML page and a notebook all format the same Report, so they
can never disagree. Torch-free.
"""
from __future__ import annotations

from dmlprof.report.build import build_report
from dmlprof.report.model import Report


def report_of(source) -> Report:
    """``source`` itself when it is a Report, else the Report of a Session (for renderers that take either)."""
    return source if isinstance(source, Report) else build_report(source)


__all__ = ["Report", "build_report", "report_of"]
