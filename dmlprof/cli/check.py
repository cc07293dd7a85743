"""``dmlprof check MODEL``: a CI gate on fallbacks. Scans (or, with --target, predicts) the model's
training step and exits 6 when a limit is passed.

With GITHUB_ACTIONS set, each fallback hotspot becomes a GitHub Actions annotation on
its source line; --junit FILE writes JUnit XML for any CI that reads test results.
"""
from __future__ import annotations

import argparse
import math

from dmlprof.backends import DEVICE_CHOICES
from dmlprof.cli.arguments import add_adapter_flag, add_target_flags, add_model_argument, add_script_flags, at_least
from dmlprof.output import add_progress_flag

EXAMPLES = """examples:
  dmlprof check models/resnet18.py --target dml --max-fallback-ops 0
  dmlprof check models/groupnorm_net.py --device emulated-dml --max-fallback-share 1% --junit fallbacks.xml
  dmlprof check train.py --target dml --from cuda -- --epochs 1   a training script written for CUDA
"""


def share(text: str) -> float:
    """A share from 0 to 1, written as a fraction (0.05) or a percentage (5%).

    A bare number from 1 up is refused: ``1`` would read as 100 % where ``5`` is
    refused, and whoever wrote it most likely meant 1 %.
    """
    percent = text.strip().endswith("%")
    try:
        value = float(text.strip().rstrip("%")) / (100 if percent else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share (0.05 or 5%)") from None
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a share from 0 to 1 (or 0% to 100%)")
    if value >= 1 and not percent:
        raise argparse.ArgumentTypeError(f"{text} is ambiguous: write {text.strip()}% or 100% "
                                         "(a bare number is a fraction below 1, such as 0.05)")
    return value


def add_parser(commands) -> None:
    parser = commands.add_parser("check", help="fail (exit 6) when a model's fallbacks pass a limit: a CI gate",
                                 description=__doc__, epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_argument(parser, "a model file (build_model, make_batch) or a training script")
    add_target_flags(parser, "predict the device's fallbacks")
    parser.add_argument("--device", default="auto", choices=DEVICE_CHOICES, help="device to run on (default: auto)")
    add_adapter_flag(parser)
    parser.add_argument("--max-fallback-share", type=share, metavar="X",
                        help="most fallback time may take of op time (of calls, with --target): 0.05 or 5%%")
    parser.add_argument("--max-fallback-ops", type=at_least(0), metavar="N",
                        help="most different ops that may fall back (default 0 when no limit is given)")
    parser.add_argument("--count-torch-only", action="store_true",
                        help="also count fallbacks only this torch reaches (DirectML users' torch 2.4.1 does not)")
    parser.add_argument("--allow-wrong-results", action="store_true",
                        help="pass calls whose results are known to be wrong on DirectML (by default they fail the check)")
    parser.add_argument("--confirm", action="store_true",
                        help="with --target dml: replay every distinct call of the predicted step on real torch-directml; "
                             "a call it contradicts fails the check")
    parser.add_argument("--junit", metavar="FILE", help="also write the verdict as JUnit XML")
    parser.add_argument("--batch-size", type=at_least(1), help="batch size (default: the file's BATCH_SIZE, else 16)")
    parser.add_argument("--steps", type=at_least(1), help="measured steps (default 3; 1 with --target)")
    parser.add_argument("--warmup", type=at_least(0), help="unrecorded steps before measuring (default 1)")
    add_script_flags(parser)
    parser.add_argument("--out", default="reports", help="folder for the saved session (default reports/)")
    parser.add_argument("--json", metavar="FILE", help="also write the JSON report (- for standard output)")
    add_progress_flag(parser)
    # gate: the verdict the supervisor gives a session it salvaged (a script's os._exit(0)), as run() gives a scan's
    parser.set_defaults(handler=run, gate=gate, html=None, tb=None, quiet=True, sync=True,
                        profiler=True, replace=False, verify=False)


def run(args) -> int:
    from dmlprof import interrupts
    from dmlprof.cli.arguments import resolve_model
    from dmlprof.cli.scan import scan_and_saved_or_confirmed as scan_and_save
    from dmlprof.model_file import inspect_model_file
    from dmlprof.output import check_paths

    resolve_model(args)
    inspect_model_file(args.model)  # a missing file or a syntax error is said before torch is imported
    check_paths(args, inputs=[args.model])
    _refuse_a_gate_that_cannot_fail(args)
    from dmlprof.cli.scan import prepare_confirm

    prepare_confirm(args)
    with interrupts.stopping():  # to the end: a signal after the session is saved ends with its line and status
        return gate(args, scan_and_save)


def gate(args, scan_and_save) -> int:
    """Scan, then hold the report to the limits (the check's verdict, annotations and --junit)."""
    if args.max_fallback_share is None and args.max_fallback_ops is None:
        args.max_fallback_ops = 0  # a gate with no limit would pass anything: by default, nothing may fall back
    import os
    import sys

    from dmlprof.output import emit, print_saved, progress_bars, to_stdout, write_output
    from dmlprof.errors import DmlprofError, LimitExceeded
    from dmlprof.render.ci import github_annotations, junit_xml, render_check_text
    from dmlprof.report.gate import check_limits
    from dmlprof.runner import loss_problem

    try:
        with progress_bars(args, quiet=False):  # check prints no report (args.quiet), yet shows its progress
            session, report, written = scan_and_save(args)
    except DmlprofError as err:  # the model failed: CI still gets its test result, failing
        _write_junit_error(args, err)
        raise
    result = check_limits(report, args.max_fallback_share, args.max_fallback_ops, args.count_torch_only,
                          getattr(args, "allow_wrong_results", False))
    out = sys.stderr if to_stdout(args) else sys.stdout
    emit(render_check_text(result, args.model), out, kept=written.note())
    if os.environ.get("GITHUB_ACTIONS") and (result.hotspots or report.known_wrong_results):
        emit(github_annotations(result), out, kept=written.note())
    from dmlprof.cli.scan import confirm_scanned

    confirmation = confirm_scanned(args, session, written.session_path, written.note())
    contradicted = confirmation.headline if confirmation is not None and confirmation.contradicted else None
    diverged = loss_problem(session)  # a NaN loss fails the gate as it fails a scan (exit 3)
    if args.junit:
        error = diverged.one_line() if diverged is not None else contradicted
        write_output(written, args.junit, lambda: junit_xml(result, args.model, error=error), "JUnit XML")
    print_saved(written, args)
    if diverged is not None:
        diverged.kept = written.note()
        raise diverged
    written.raise_problems()
    if contradicted is not None:
        error = LimitExceeded(contradicted, remedy="the confirmation table lists each call real torch-directml "
                                                   "contradicts")
        error.kept = written.note()
        raise error
    if not result.passed:
        error = LimitExceeded("; ".join(check.describe() for check in result.failed),
                              # with no fallback listed, the failed limit's own words say what to change
                              remedy="see the fallbacks above and their fixes" if result.hotspots else None)
        error.kept = written.note()
        raise error
    return 0


def _refuse_a_gate_that_cannot_fail(args) -> None:
    """On the CPU nothing falls back, so a check there passes whatever the model does."""
    from dmlprof.errors import UsageError

    if args.target and "," in args.target:
        raise UsageError("check gates one target at a time", remedy="run one check per target (--target xpu, ...)")
    if args.target_torch and not args.target:
        raise UsageError("--target-torch names the torch a prediction reads: it needs --target")
    if args.target:
        return
    from dmlprof.backends import AUTO_ORDER, backend_class

    name = args.device
    if name == "auto":
        name = next((c for c in AUTO_ORDER if backend_class(c).availability().available), "cpu")
    if backend_class(name).device_type == "cpu":
        raise UsageError("check on the CPU cannot fail: no op falls back to the CPU there"
                         + (" (no accelerator found)" if args.device == "auto" else ""),
                         remedy="add --target dml to predict DirectML's fallbacks, or --device NAME for an accelerator")


def _write_junit_error(args, err) -> None:
    """--junit as one test case in error, carrying the run's one line (what it kept joins the error's)."""
    if not args.junit:
        return
    from dmlprof.output import Written, write_output
    from dmlprof.render.ci import junit_error_xml

    written = Written()
    write_output(written, args.junit, lambda: junit_error_xml(args.model, err.one_line()), "JUnit XML")
    if written.problems:
        kept = getattr(err, "kept", None) or ""
        err.kept = "; ".join(part for part in (kept, "not written: " + "; ".join(written.problems)) if part)
