"""Where a command writes its session and reports, and its one-line error (every command's: scan, check,
report, sweep, and a launched job's ranks).

The session is saved first, under a name no other run holds, so nothing
recorded is lost. Then each report (formatted from one report value,
:func:`dmlprof.report.build_report`) is written whole or not at all (a full disk
leaves an older report as it was). A report that cannot be written does not
stop the others, the terminal report or the "session saved" line: it is
reported at the end, in the same one line as the run's own error if the run
failed (whose exit code it keeps).

``--json -`` / ``--html -`` write that report to standard output; the terminal
report is then left out and the "session saved" line goes to stderr.

Progress bars go to stderr, only when it is a terminal (:mod:`dmlprof.progress`).
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from dmlprof.errors import DmlprofError, UsageError
from dmlprof.files import same_file, write_atomic

STDOUT = "-"


@dataclass
class Written:
    """What was saved where, and what could not be written."""

    session_path: Optional[Path] = None
    problems: List[str] = field(default_factory=list)
    files: List[Tuple[str, str]] = field(default_factory=list)  # (what, where) of each report written

    def note(self, partial: bool = False) -> str:
        """``partial session saved to X; not written: ...`` (for the end of an error line)."""
        parts = []
        if self.session_path is not None:
            parts.append(f"{'partial ' if partial else ''}session saved to {self.session_path}")
        if self.problems:
            parts.append("not written: " + "; ".join(self.problems))
        return "; ".join(parts)

    def raise_problems(self) -> None:
        """A UsageError (exit 2) naming what was not written, if anything was not."""
        if self.problems:
            error = UsageError(f"cannot write {self.problems[0]}"
                               + (f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""))
            error.kept = f"session saved to {self.session_path}" if self.session_path else ""
            raise error


def add_progress_flag(parser) -> None:
    """``--no-progress``, the same for every command that runs a model."""
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="draw no progress bars on stderr (they are drawn only when stderr is a terminal)")


def progress_bars(args, quiet: bool):
    """The progress bars of the run inside, on stderr: off with ``quiet`` or --no-progress, or off a terminal."""
    from dmlprof import progress

    return progress.shown(sys.stderr, requested=getattr(args, "progress", True) and not quiet)


#: every option naming a report file a command may write (``-``: standard output)
FILE_OUTPUTS = ("json", "html", "trace", "junit")
#: options naming a folder a command writes into
FOLDER_OUTPUTS = ("out", "tb")


def to_stdout(args) -> bool:
    return STDOUT in (getattr(args, name, None) for name in FILE_OUTPUTS)


@contextmanager
def script_output_to_stderr(args):
    """While the user's code runs, with a report going to standard output (``--json -``), what the code
    prints goes to stderr instead, at the descriptor (its subprocesses and C++ prints too): the report on
    stdout stays the only thing there (``| jq`` reads it). Elsewhere a no-op."""
    if not to_stdout(args):
        yield
        return
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):  # no real stdout descriptor (an embedding host)
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        try:
            sys.stdout.flush()  # what the code printed and Python still holds goes where the rest went
        except (OSError, ValueError):
            pass
        os.dup2(saved, 1)
        os.close(saved)


def check_paths(args, inputs=()) -> None:
    """Refuse, before anything runs, outputs that would clobber an input, each other, or share stdout.

    Every output option of every command is checked here (:data:`FILE_OUTPUTS`, :data:`FOLDER_OUTPUTS`);
    ``inputs`` are the files the command reads (a run folder's: each rank's files, :func:`input_files`).
    """
    _refuse_empty_names(args)
    outputs = [(f"--{name}", getattr(args, name, None)) for name in FILE_OUTPUTS]
    outputs = [(option, value) for option, value in outputs if value is not None]
    if [value for _, value in outputs].count(STDOUT) > 1:
        raise UsageError("only one of " + ", ".join(option for option, _ in outputs) + " can go to standard output (-)")
    files = [(option, Path(value)) for option, value in outputs if value != STDOUT]
    for i, (option, path) in enumerate(files):
        for other, other_path in files[i + 1:]:
            if _same_path(path, other_path):
                raise UsageError(f"{option} and {other} name the same file ({path}); each report needs its own")
    for option, path in files:
        if path.is_dir():
            raise UsageError(f"{option} {path} is a folder; give a file name")
        for source, folder in input_files(inputs):
            if _same_path(path, source):
                what = f"a file of the input folder {folder}" if folder else "the input file itself"
                raise UsageError(f"{option} {path} is {what}; writing the report there would destroy it")


def _refuse_empty_names(args) -> None:
    """``--json ""`` (an unset shell variable) names no file: say so rather than skip the report."""
    for name in FILE_OUTPUTS + FOLDER_OUTPUTS:
        value = getattr(args, name, None)
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"--{name} is given an empty name",
                             remedy="give a file or folder name" + (", or - for standard output"
                                                                     if name in FILE_OUTPUTS else ""))


def input_files(inputs) -> list:
    """(file, folder or None): each input file, and each file inside an input folder (a run folder's ranks)."""
    found = []
    for source in inputs:
        if not source:
            continue
        path = Path(source)
        try:
            found += [(entry, path) for entry in path.iterdir() if entry.is_file()] if path.is_dir() else [(path, None)]
        except OSError:
            found.append((path, None))
    return found


def _same_path(a: Path, b: Path) -> bool:
    if same_file(a, b):
        return True
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


def save_session(session, args, filename: Optional[str] = None, written: Optional[Written] = None) -> Written:
    """Save the session under --out (a fresh name, never over another run's), then write the reports."""
    written = written or Written()
    out_dir = Path(getattr(args, "out", None) or "reports")
    try:
        written.session_path = session.save(out_dir / (filename or session.default_filename()), new=True)
    except OSError as exc:
        written.problems.append(f"the session under {out_dir} ({_reason(exc)})")
    return written


def _json_report(report) -> str:
    from dmlprof.render.json_report import render_json

    return render_json(report)


def _html_report(report) -> str:
    from dmlprof.render.html import render_html

    return render_html(report)


#: the report files a command writes from a Report or a RunReport: its option, what it is called, how it is made
#: (the one table of formats: a scan, ``dmlprof report`` of a session or of a run folder, a sweep)
REPORT_FORMATS = (("json", "JSON report", _json_report), ("html", "HTML report", _html_report))


def write_report_files(report_source, args, written: "Written", made: Optional[dict] = None) -> None:
    """Each report file of :data:`REPORT_FORMATS` that ``args`` asks for, from ``report_source()`` (built once, when
    one is asked); ``made`` replaces how a format is made (option -> function of the report)."""
    asked = [(option, what, (made or {}).get(option, make)) for option, what, make in REPORT_FORMATS
             if getattr(args, option, None)]
    report = report_source() if asked else None
    for option, what, make in asked:
        write_output(written, getattr(args, option), lambda make=make: make(report), what)


def write_reports(session, args, written: Optional[Written] = None, report=None,
                  json_text: Optional[Callable] = None) -> Written:
    """Write --json, --html and --tb if asked, from ``report`` (the session's, built here when not given);
    collects what failed in ``written.problems``."""
    from dmlprof.report import report_of

    written = written or Written()
    write_report_files(lambda: report or report_of(session), args, written, {"json": json_text} if json_text else None)
    if getattr(args, "trace", None):
        from dmlprof.render.trace import trace_json

        try:
            write_output(written, args.trace, lambda: trace_json(session), "Chrome/Perfetto trace")
        except DmlprofError as err:  # a session without timed calls has no trace
            written.problems.append(f"--trace {args.trace} ({err.one_line()})")
    if getattr(args, "tb", None):
        from dmlprof.render.trace import write_tensorboard_run

        from dmlprof import progress

        try:
            with progress.phase("writing the TensorBoard trace"):
                trace = write_tensorboard_run(session, Path(args.tb))
        except DmlprofError as err:
            written.problems.append(f"--tb {args.tb} ({err.one_line()})")
        else:
            written.files.append(("TensorBoard trace", str(trace)))
    return written


def write_outputs(session, args, report=None) -> Written:
    """The session, then every report asked for (see the module docstring)."""
    return write_reports(session, args, save_session(session, args), report=report)


def write_output(written: Written, target: str, render: Callable[[], str], what: str = "report") -> None:
    """``render()``'s text to the file ``target`` (whole or not at all) or, for ``-``, to stdout;
    a file written is noted in ``written.files`` (``what`` names it), one that cannot be in ``written.problems``."""
    text = render()
    if target == STDOUT:
        emit(text, sys.stdout, kept=written.note())
        return
    try:
        write_atomic(Path(target), text)
    except OSError as exc:
        written.problems.append(f"{target} ({_reason(exc)})")
    else:
        written.files.append((what, target))


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def print_report(report, args) -> None:
    """The terminal report of a Report (or Session), unless --quiet or a report goes to standard output."""
    from dmlprof.render.terminal import render_text

    if getattr(args, "quiet", False) or to_stdout(args):
        return
    emit(render_text(report, top=getattr(args, "top", 15)), sys.stdout, kept=getattr(args, "kept", None))


def emit(text: str, stream, kept: Optional[str] = None) -> None:
    """Print ``text`` to ``stream``; a stream that cannot take it (``> /dev/full``) is a one-line UsageError.

    ``kept`` (where the session went) rides along in that error line.
    """
    try:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
    except BrokenPipeError:
        raise  # the reader went away (| head): the CLI exits quietly
    except OSError as exc:
        name = "standard output" if stream is sys.stdout else "standard error"
        if stream is sys.stdout:
            silence_stdout()
        error = UsageError(f"cannot write to {name}: {_reason(exc)}")
        error.kept = kept
        raise error from None


def command_word(path) -> str:
    """``path`` as one word of a shell command to copy: quoted where it has spaces or a shell's special characters
    (a session under "My Documents" pasted unquoted is two arguments)."""
    text = str(path)
    if os.name == "nt":
        return f'"{text}"' if any(c in text for c in ' &()^%!;,=') else text
    import shlex

    return shlex.quote(text)


def print_saved(written: Written, args) -> None:
    """Where the session and every report file went (stderr when stdout is for a report or --quiet)."""
    where = sys.stderr if getattr(args, "quiet", False) or to_stdout(args) else sys.stdout
    if written.session_path is not None:
        emit(f"\nsession saved to {written.session_path}\n  re-render it: dmlprof report "
             f"{command_word(written.session_path)}", where,
             kept=written.note())
    announce(written, where)


def announce(written: Written, stream) -> None:
    """One line per report file written: ``JSON report written to r.json``."""
    if written.files:
        emit("\n".join(f"{what} written to {where}" for what, where in written.files), stream, kept=written.note())


def error_line(message: str, kept=None) -> None:
    """``dmlprof: error: MESSAGE [KEPT]`` on stderr, as one line whatever the message holds: names from a
    model or a run folder may carry escape sequences or newlines (shown as ``\\xNN``, never sent raw)."""
    from dmlprof.render.format import clean

    try:
        print(f"dmlprof: error: {clean(message)}" + (f" [{clean(kept)}]" if kept else ""), file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):  # no stderr left (a closed terminal): the exit code still says it
        pass


def silence_stdout() -> None:
    """Point stdout at the null device after it failed: Python flushes it again at exit, and what
    failed once would fail there, with a traceback."""
    try:
        devnull = open(os.devnull, "w", encoding="utf-8")
        os.dup2(devnull.fileno(), sys.stdout.fileno())
        sys.stdout = devnull
    except (OSError, ValueError, AttributeError):
        pass
