"""The JSON report: the Report's data as JSON (schema: docs/report_schema.md; a sweep: docs/sweep_schema.md)."""
from __future__ import annotations

import json

from dmlprof.report import report_of


def render_json(source) -> str:
    """The JSON report of a Session or Report (a sweep session gives the sweep document)."""
    return json.dumps(report_of(source).to_dict(), indent=2, allow_nan=False)
