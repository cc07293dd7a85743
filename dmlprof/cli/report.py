"""``dmlprof report SESSION``: re-render a saved session without re-running anything.

``dmlprof report`` alone shows the latest session in reports/, and ``dmlprof report FOLDER`` the latest in
FOLDER (a distributed run's folder among them).
"""
from __future__ import annotations

from pathlib import Path

#: where scan saves sessions unless --out says otherwise
DEFAULT_FOLDER = "reports"


def add_parser(commands) -> None:
    from dmlprof.cli.arguments import at_least

    parser = commands.add_parser("report", help="re-render a saved session", description=__doc__)
    parser.add_argument("session", nargs="?", default=DEFAULT_FOLDER,
                        help="a .session.json file written by scan, the run folder of a distributed scan, or a folder "
                        "whose latest session is shown (default: reports/, where scan saves them)")
    parser.add_argument("--json", metavar="FILE", help="write the JSON report (- for standard output)")
    parser.add_argument("--html", metavar="FILE", help="write the HTML report (- for standard output)")
    parser.add_argument("--tb", metavar="DIR", help="write a TensorBoard profiler run under DIR")
    parser.add_argument("--trace", metavar="FILE", help="write every call as a Chrome/Perfetto trace (JSON) to FILE")
    parser.add_argument("--top", type=at_least(1), default=15, help="rows per table in the terminal report")
    parser.add_argument("--quiet", action="store_true", help="print no terminal report")
    parser.set_defaults(handler=run)


def run(args) -> int:
    import sys

    from dmlprof.output import check_paths, print_report, print_saved, write_reports
    from dmlprof.distributed.run_dir import is_run_dir
    from dmlprof.report import build_report
    from dmlprof.session import Session

    if args.session == DEFAULT_FOLDER and not Path(DEFAULT_FOLDER).exists():
        from dmlprof.errors import UsageError

        raise UsageError(f"no {DEFAULT_FOLDER}/ folder here, where scan saves sessions",
                         remedy="give a session file or folder: dmlprof report PATH")
    if Path(args.session).is_dir() and not is_run_dir(args.session):
        args.session = str(latest_session(Path(args.session)))
        print(f"dmlprof: the latest session in that folder: {args.session}", file=sys.stderr)
    check_paths(args, inputs=[args.session])
    if is_run_dir(args.session):  # a distributed run: its ranks merged into one report
        from dmlprof.job.report import print_run

        if args.trace:
            from dmlprof.errors import UsageError

            raise UsageError("--trace writes one session's calls; a run folder holds one per rank",
                             remedy=f"--tb DIR writes each rank's trace, or: dmlprof report {args.session}/rank0.session.json --trace FILE")
        print_run(args.session, args, traces=True)
        return 0

    session = Session.load(args.session)
    if args.trace or getattr(args, "tb", None):  # refused before the report is printed, not after it
        from dmlprof.render.trace import refuse_untimed

        refuse_untimed(session)
    report = build_report(session)  # any kind of session: a scan, a prediction, a sweep
    written = write_reports(session, args, report=report)
    print_report(report, args)
    print_saved(written, args)
    written.raise_problems()
    return 0


def latest_session(folder: Path) -> Path:
    """The session file or distributed run folder in ``folder`` written last (by modification time)."""
    from dmlprof.distributed.run_dir import is_run_dir
    from dmlprof.errors import UsageError

    try:
        found = [path for path in folder.iterdir()
                 if (path.is_file() and path.name.endswith(".session.json")) or is_run_dir(path)]
    except OSError as exc:
        raise UsageError(f"cannot read the folder {folder}: {exc.strerror or exc}") from None
    if not found:
        raise UsageError(f"no session in {folder} (no .session.json file, no run folder)",
                         remedy="dmlprof scan MODEL saves one in reports/; or give the session file")
    return max(found, key=lambda path: (_written_at(path), path.name))


def _written_at(path: Path) -> float:
    """When a session file, or the newest file of a run folder, was last written."""
    try:
        if path.is_dir():
            return max(entry.stat().st_mtime for entry in path.iterdir())
        return path.stat().st_mtime
    except (OSError, ValueError):
        return 0.0
