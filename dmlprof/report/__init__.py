"""The report value: :func:`build_report` turns a Session into a :class:`Report`, computed once; a
launched job's run folder is one :class:`RunReport` (:func:`merged_report`).

Between the data (a Session, a run folder) and the renderers: the terminal,
the JSON file, the HTML page and a notebook all format the same value, so they
can never disagree. Torch-free.
"""
from __future__ import annotations

from typing import Union

from dmlprof.report.build import build_report
from dmlprof.report.model import Report
from dmlprof.report.run import DISTRIBUTED, RunReport, merged_report

#: what every renderer formats (the one renderer contract): one run's Report, or every rank of a job as one
Renderable = Union[Report, RunReport]


def report_of(source) -> Renderable:
    """``source`` itself when it is a report (a Report, a RunReport), else the Report of a Session: every
    renderer takes any of them through this one door."""
    return source if isinstance(source, (Report, RunReport)) else build_report(source)


def is_merged_run(report: Renderable) -> bool:
    """Whether ``report`` holds every rank of a job (its renderers show ranks, not one run's ops)."""
    return report.session_kind == DISTRIBUTED


__all__ = ["Renderable", "Report", "RunReport", "build_report", "is_merged_run", "merged_report", "report_of"]
