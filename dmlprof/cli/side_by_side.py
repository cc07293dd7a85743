"""``dmlprof scan MODEL.py --target dml,xpu,mps``: one predicted step per target, one short verdict each.

Each target is predicted as ``--target T`` alone predicts it (its session saved under --out); a step that
fails on one target is that target's verdict, not the command's error. A step that raised for another reason
than a call the device refuses (the model's own error) is said so on its line, and ends the command as it
ends ``--target T`` alone (exit 3), once every target's line is out; so does a step the prediction cannot
follow on a target (exit 2). ``--json FILE`` writes every target's verdict and report in one document (format
``dmlprof-targets``). A stop signal or dmlprof's own error in one target's prediction ends the command with every
target's line (the finished ones', the running one ``cut short``) and each session kept named in its error line; a
native crash there is said the same way by the supervisor, from the journal (dmlprof.salvage.salvage_side_by_side).
"""
from __future__ import annotations

import json
import sys


def run_side_by_side(args) -> int:
    from dmlprof.errors import DmlprofError, UsageError
    from dmlprof.output import Written, emit, save_session, write_output
    from dmlprof.report import build_report
    from dmlprof.report.targets import failed_before_the_step, lines_block, target_verdict

    for flag in ("html", "tb", "trace", "replace", "verify", "confirm"):
        if getattr(args, flag, None):
            raise UsageError(f"--{flag} shows one run: with several targets, run --target T --{flag} for each")
    targets = args.target.split(",")
    written, rows, saved = Written(), [], []
    model_raised = None  # the first step that raised of its own (not a call the device refuses)
    first_unpredicted = None  # the first step the prediction could not follow
    for target in targets:
        _journal_target_begins(target, targets, rows, saved)
        try:
            session, raised, refused, unpredicted = _predict(args, target)
        except _BeforeTheStep as failed:  # no verdict (not predicted), or the target's own: the others still run
            rows.append((failed_before_the_step(target, failed.error.one_line(), predicted=failed.predicted), None))
            first_unpredicted = first_unpredicted or (None if failed.predicted else failed.error)
            continue
        except (KeyboardInterrupt, DmlprofError) as ended:  # a stop signal, or dmlprof's own error: the command's
            raise _cut_short(args, ended, target, targets, [verdict.line for verdict, _ in rows], saved) from None
        model_raised = model_raised or raised
        first_unpredicted = first_unpredicted or unpredicted
        written.session_path = None  # this target's, once saved (a session that could not be is a problem noted)
        save_session(session, args, written=written)
        if written.session_path is not None:
            saved.append((target, written.session_path, False))
        report = build_report(session)
        rows.append((target_verdict(report, raised=raised.cause.one_line() if raised is not None else None,
                                    refused=refused, unpredicted=unpredicted), report))
    lines = [verdict.line for verdict, _ in rows]
    if args.json:
        doc = {"format": "dmlprof-targets", "format_version": 1, "model": args.model,
               "targets": [{**verdict.to_dict(), "report": report.to_dict() if report is not None else None}
                            for verdict, report in rows]}
        write_output(written, args.json, lambda: json.dumps(doc, indent=1, default=str), "JSON report")
    if not args.quiet:
        emit(lines_block(lines), _lines_stream(args), kept=written.note())
    from dmlprof.output import announce, to_stdout

    where = sys.stderr if args.quiet or to_stdout(args) else sys.stdout
    emit("\n".join(f"{target} session saved to {path}" for target, path, _ in saved), where)
    announce(written, where)
    written.raise_problems()
    if model_raised is not None:
        raise model_raised.cause
    if first_unpredicted is not None:
        raise first_unpredicted
    return 0


class _BeforeTheStep(Exception):
    """A target whose prediction failed before any call was recorded: its verdict (``predicted``), or none."""

    def __init__(self, error, predicted: bool):
        super().__init__(str(error))
        self.error, self.predicted = error, predicted


def _predict(args, target: str):
    """One target's predicted step: (session, the stop of a step that raised of its own or None, the device's
    refusal of the step or None, the stop the prediction could not follow or None). Raises :class:`_BeforeTheStep`
    where it failed before any call was recorded, and a stop signal or dmlprof's own error as they come."""
    from dmlprof.errors import DeviceError, ModelRaisedError, NotPredicted
    from dmlprof.predict import DML_TARGET, predict_scan
    from dmlprof.runner import ScanStopped

    try:
        session = predict_scan(args.model, target=target, batch_size=args.batch_size, steps=args.steps,
                               warmup=args.warmup, float64=args.adapter == "float64" and target == DML_TARGET,
                               target_torch=args.target_torch if target != DML_TARGET else None)
    except ScanStopped as stopped:  # the step fails on this target: that is its verdict
        if isinstance(stopped.cause, NotPredicted):  # the stand-in cannot follow the step there: no verdict
            return stopped.session, None, None, stopped.cause
        if stopped.session.meta.device_failure is not None:  # a call the device refuses: the session's finding
            return stopped.session, None, None, None
        if isinstance(stopped.cause, DeviceError):  # the device refuses what the step asks of it (autocast on DirectML)
            return stopped.session, None, stopped.cause, None
        if isinstance(stopped.cause, ModelRaisedError):  # it stopped for another reason than a refused call
            return stopped.session, stopped, None, None
        raise  # an interruption, or dmlprof's own error: the command's, not a verdict
    except NotPredicted as failed:  # before any call was recorded: no verdict, the other targets predicted
        raise _BeforeTheStep(failed, predicted=False) from None
    except DeviceError as failed:  # it fails before any call is recorded (a float64 model's move to MPS): so is
        # its verdict, and the other targets are still predicted (it ended the whole comparison, rc 4)
        raise _BeforeTheStep(failed, predicted=True) from None
    return session, None, None, None


def _lines_stream(args):
    """Where the per-target lines go: standard output, unless the JSON document does (``--json -``)."""
    return sys.stderr if args.json == "-" else sys.stdout


def _journal_target_begins(target: str, targets: list, rows: list, saved: list) -> None:
    """Tell the scan's journal (in a supervised child) which target is predicted now, with the finished targets'
    lines and sessions: if the process dies in this one (a native crash), its supervisor reports each target."""
    from dmlprof.record.journal import process_journal

    journal = process_journal()
    if journal is None:  # unsupervised (the Python API, DMLPROF_NO_SUPERVISOR): nobody would read it
        return
    journal.target_begins(json.dumps({
        "target": target, "targets": targets, "lines": [verdict.line for verdict, _ in rows],
        "saved": [[name, str(path), partial] for name, path, partial in saved]}))


def _cut_short(args, ended: BaseException, target: str, targets: list, finished_lines: list, saved: list):
    """The error that ends a side-by-side run which a stop signal (Ctrl-C, SIGTERM, SIGHUP) or dmlprof's own error
    ``ended`` in ``target``'s prediction: the running target's partial session saved (where it recorded calls), the
    lines of every target printed (the finished ones' as they were), and the error's bracket naming each session
    kept, with the stop's own exit status (docs/exit_codes.md)."""
    from dmlprof import interrupts
    from dmlprof.errors import Interrupted
    from dmlprof.output import emit, save_session
    from dmlprof.report.targets import cut_short_lines, lines_block, saved_note, title
    from dmlprof.runner import ScanStopped

    kept_of_it = "nothing of it was saved"
    partial = ended.session if isinstance(ended, ScanStopped) else None
    if partial is not None and not partial.ops.empty:
        with interrupts.saving():  # a second Ctrl-C must not lose it
            path = save_session(partial, args).session_path
        if path is not None:
            saved = saved + [(target, path, True)]
            kept_of_it = "its partial session saved"
    cause = ended.cause if isinstance(ended, ScanStopped) else ended
    if isinstance(cause, (KeyboardInterrupt, Interrupted)):
        stop = cause if isinstance(cause, KeyboardInterrupt) else interrupts.stop_of(cause)
        how = str(interrupts.cause_of(stop))  # "interrupted", "stopped by SIGTERM"
        done = ", ".join(title(name) for name in targets[:targets.index(target)])
        error = interrupts.cause_of(stop, f"interrupted while {title(target)} was predicted"
                                          + (f", after {done} (lines above)" if done else ""))
    else:
        how, error = cause.one_line(), cause
    if not args.quiet:
        emit(lines_block(cut_short_lines(finished_lines, targets, target, how, kept_of_it)), _lines_stream(args))
    error.kept = saved_note(saved) or "nothing was saved"
    return error
