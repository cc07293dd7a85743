"""Where a command writes its session and reports (shared by scan-like commands)."""
from __future__ import annotations

import sys
from pathlib import Path

from dmlprof.errors import UsageError


def write_outputs(session, args) -> Path:
    """Save the session under --out, then write --json/--html/--tb if asked. Returns the session path."""
    out_dir = Path(getattr(args, "out", None) or "reports")
    try:
        session_path = session.save(out_dir / session.default_filename())
    except OSError as exc:
        raise UsageError(f"cannot write the session under {out_dir}: {exc.strerror or exc}") from None
    write_reports(session, args)
    return session_path


def write_reports(session, args) -> None:
    from dmlprof.render.json_report import render_json

    if getattr(args, "json", None):
        _write(Path(args.json), render_json(session))
    if getattr(args, "html", None):
        from dmlprof.render.html import render_html

        _write(Path(args.html), render_html(session))
    if getattr(args, "tb", None):
        from dmlprof.render.trace import write_tensorboard_run

        write_tensorboard_run(session, Path(args.tb))


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def print_report(session, args) -> None:
    from dmlprof.render.terminal import render_text

    if getattr(args, "quiet", False):
        return
    print(render_text(session, top=getattr(args, "top", 15)))
    sys.stdout.flush()
