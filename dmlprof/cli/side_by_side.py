"""``dmlprof scan MODEL.py --target dml,xpu,mps``: one predicted step per target, one short verdict each.

Each target is predicted as ``--target T`` alone predicts it (its session saved under --out); a step that
fails on one target is that target's verdict, not the command's error. A step that raised for another reason
than a call the device refuses (the model's own error) is said so on its line, and ends the command as it
ends ``--target T`` alone (exit 3), once every target's line is out; so does a step the prediction cannot
follow on a target (exit 2). ``--json FILE`` writes every target's verdict and report in one document (format
``dmlprof-targets``).
"""
from __future__ import annotations

import json
import sys


def run_side_by_side(args) -> int:
    from dmlprof.errors import DeviceError, ModelRaisedError, NotPredicted, UsageError
    from dmlprof.output import Written, emit, save_session, write_output
    from dmlprof.predict import DML_TARGET, predict_scan
    from dmlprof.report import build_report
    from dmlprof.report.targets import failed_before_the_step, target_verdict
    from dmlprof.runner import ScanStopped

    for flag in ("html", "tb", "trace", "replace", "verify", "confirm"):
        if getattr(args, flag, None):
            raise UsageError(f"--{flag} shows one run: with several targets, run --target T --{flag} for each")
    targets = args.target.split(",")
    written, rows, saved = Written(), [], []
    model_raised = None  # the first step that raised of its own (not a call the device refuses)
    first_unpredicted = None  # the first step the prediction could not follow
    for target in targets:
        raised = refused = unpredicted = None
        try:
            session = predict_scan(args.model, target=target, batch_size=args.batch_size, steps=args.steps,
                                   warmup=args.warmup, float64=args.adapter == "float64" and target == DML_TARGET,
                                   target_torch=args.target_torch if target != DML_TARGET else None)
        except ScanStopped as stopped:  # the step fails on this target: that is its verdict
            session = stopped.session
            if isinstance(stopped.cause, NotPredicted):  # the stand-in cannot follow the step there: no verdict
                unpredicted = stopped.cause
                first_unpredicted = first_unpredicted or unpredicted
            elif isinstance(stopped.cause, DeviceError) and session.meta.device_failure is None:
                refused = stopped.cause  # the device refuses what the step asks of it (autocast on DirectML)
            elif session.meta.device_failure is None:  # it stopped for another reason than a refused call
                if not isinstance(stopped.cause, ModelRaisedError):
                    raise  # an interruption, or dmlprof's own error: the command's, not a verdict
                raised = stopped.cause
                model_raised = model_raised or stopped
        except NotPredicted as failed:  # before any call was recorded: no verdict, the other targets predicted
            rows.append((failed_before_the_step(target, failed.one_line(), predicted=False), None))
            saved.append(None)
            first_unpredicted = first_unpredicted or failed
            continue
        except DeviceError as failed:  # it fails before any call is recorded (a float64 model's move to MPS): so
            # is its verdict, and the other targets are still predicted (it ended the whole comparison, rc 4)
            rows.append((failed_before_the_step(target, failed.one_line()), None))
            saved.append(None)
            continue
        save_session(session, args, written=written)
        saved.append(written.session_path)
        report = build_report(session)
        rows.append((target_verdict(report, raised=raised.one_line() if raised is not None else None,
                                    refused=refused, unpredicted=unpredicted), report))
    lines = [verdict.line for verdict, _ in rows]
    if args.json:
        doc = {"format": "dmlprof-targets", "format_version": 1, "model": args.model,
               "targets": [{**verdict.to_dict(), "report": report.to_dict() if report is not None else None}
                            for verdict, report in rows]}
        write_output(written, args.json, lambda: json.dumps(doc, indent=1, default=str), "JSON report")
    if not args.quiet:
        out = sys.stderr if args.json == "-" else sys.stdout
        emit("\n".join(["predicted, not measured: one step on each target"] + [f"  {line}" for line in lines]),
             out, kept=written.note())
    from dmlprof.output import announce, to_stdout

    where = sys.stderr if args.quiet or to_stdout(args) else sys.stdout
    emit("\n".join(f"{target} session saved to {path}" for target, path in zip(targets, saved) if path), where)
    announce(written, where)
    written.raise_problems()
    if model_raised is not None:
        raise model_raised.cause
    if first_unpredicted is not None:
        raise first_unpredicted
    return 0
