"""The JSON report: the report's data as JSON (schema: docs/report_schema.md; a sweep: docs/sweep_schema.md;
a launched job's merged run: docs/distributed.md)."""
from __future__ import annotations

import json

from dmlprof.report import report_of


def render_json(source) -> str:
    """The JSON report of a Session, a Report or a RunReport (a sweep session gives the sweep document, a merged
    run the ``dmlprof-distributed-report``)."""
    return json.dumps(report_of(source).to_dict(), indent=2, allow_nan=False)
