"""``dmlprof report RUN_DIR`` (and the rank that prints a launched run's report): load the run folder,
build the merged report (every rank as one RunReport), write --json/--html/--tb and print it, through
the renderers every report goes through."""
from __future__ import annotations

import sys
from pathlib import Path

from dmlprof.render.format import clean
from dmlprof.render.terminal import render_text
from dmlprof.report import RunReport, merged_report


# -- the command ------------------------------------------------------------------------
def write_reports(report: RunReport, args) -> None:
    """--json and --html of ``dmlprof report RUN_DIR`` (and of the rank that prints the merged report): each
    written whole or not at all, as every command's reports; a one-line UsageError naming what could not be."""
    from dmlprof.output import Written, announce, write_report_files

    written = Written()
    write_report_files(lambda: report, args, written)
    announce(written, sys.stderr)  # what was written is said, whatever else could not be
    written.raise_problems()


def write_rank_traces(run, args) -> None:
    """--tb DIR: each rank's trace under ``DIR/<run folder>/`` (what ``dmlprof view DIR`` shows as one run)."""
    from dmlprof.distributed.trace import write_rank_trace

    for rank, session in sorted(run.sessions.items()):
        if len(session.ops) and int(session.ops["time_ns"].sum()) > 0:
            path = write_rank_trace(session, Path(args.tb), run.folder.name)
            print(clean(f"TensorBoard trace of rank {rank} written to {path}"), file=sys.stderr)


def print_run(folder, args, traces: bool = False) -> RunReport:
    """Load a run folder, write --json/--html (and, with ``traces``, --tb: the ranks of a scan wrote their own),
    print the text report unless --quiet or a report goes to standard output; returns the report."""
    from dmlprof.output import to_stdout
    from dmlprof.distributed.run_dir import load_run

    run = load_run(folder)
    report = merged_report(run)
    write_reports(report, args)
    if traces and getattr(args, "tb", None):
        write_rank_traces(run, args)
    if not getattr(args, "quiet", False) and not to_stdout(args):
        print(render_text(report, top=getattr(args, "top", 15)))
    where = sys.stderr if to_stdout(args) else sys.stdout
    if not getattr(args, "quiet", False) or to_stdout(args):
        # the blank line is printed apart: clean() shows a newline inside a name as \x0a, and would show this one too
        print(file=where)
        # the command on a line of its own, as a scan's "session saved to" puts it (one line ran to 125 columns)
        print(clean(f"run saved to {folder}"), file=where)
        from dmlprof.output import command_word

        print(clean(f"  re-render it: dmlprof report {command_word(folder)}"), file=where)
    sys.stdout.flush()
    return report
