"""Where a command writes its session and reports (shared by scan-like commands).

The report is built once (:func:`dmlprof.report.build_report`) and every
format the user asked for is written from it.
"""
from __future__ import annotations

import sys
from pathlib import Path

from dmlprof.errors import UsageError


def write_outputs(session, args, report=None) -> Path:
    """Save the session under --out, then write --json/--html/--tb if asked. Returns the session path."""
    out_dir = Path(getattr(args, "out", None) or "reports")
    try:
        session_path = session.save(out_dir / session.default_filename())
    except OSError as exc:
        raise UsageError(f"cannot write the session under {out_dir}: {exc.strerror or exc}") from None
    write_reports(session, args, report)
    return session_path


def write_reports(session, args, report=None) -> None:
    """Write --json, --html and --tb as asked (``report``: the session's, when already built)."""
    if getattr(args, "json", None) or getattr(args, "html", None):
        from dmlprof.report import report_of

        report = report or report_of(session)
    if getattr(args, "json", None):
        from dmlprof.render.json_report import render_json

        _write(Path(args.json), render_json(report))
    if getattr(args, "html", None):
        from dmlprof.render.html import render_html

        _write(Path(args.html), render_html(report))
    if getattr(args, "tb", None):
        from dmlprof.render.trace import write_tensorboard_run

        write_tensorboard_run(session, Path(args.tb))


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def print_report(report, args) -> None:
    """The terminal report of a Report (or Session), unless --quiet."""
    from dmlprof.render.terminal import render_text

    if getattr(args, "quiet", False):
        return
    print(render_text(report, top=getattr(args, "top", 15)))
    sys.stdout.flush()
