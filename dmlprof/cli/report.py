"""``dmlprof report SESSION``: re-render a saved session without re-running anything."""
from __future__ import annotations


def add_parser(commands) -> None:
    from dmlprof.cli.arguments import at_least

    parser = commands.add_parser("report", help="re-render a saved session", description=__doc__)
    parser.add_argument("session", help="a .session.json file written by scan, or the run folder of a distributed scan")
    parser.add_argument("--json", metavar="FILE", help="write the JSON report (- for standard output)")
    parser.add_argument("--html", metavar="FILE", help="write the HTML report (- for standard output)")
    parser.add_argument("--tb", metavar="DIR", help="write a TensorBoard profiler run under DIR")
    parser.add_argument("--trace", metavar="FILE", help="write every call as a Chrome/Perfetto trace (JSON) to FILE")
    parser.add_argument("--top", type=at_least(1), default=15, help="rows per table in the terminal report")
    parser.add_argument("--quiet", action="store_true", help="print no terminal report")
    parser.set_defaults(handler=run)


def run(args) -> int:
    import sys

    from dmlprof.cli.output import check_paths, print_report, print_saved, write_reports
    from dmlprof.distributed.run_dir import is_run_dir
    from dmlprof.report import build_report
    from dmlprof.session import Session

    check_paths(args, inputs=[args.session])
    if is_run_dir(args.session):  # a distributed run: its ranks merged into one report
        from dmlprof.distributed.report import print_run

        print_run(args.session, args)
        return 0

    session = Session.load(args.session)
    report = build_report(session)  # any kind of session: a scan, a prediction, a sweep
    written = write_reports(session, args, report=report)
    print_report(report, args)
    print_saved(written, args)
    written.raise_problems()
    return 0
