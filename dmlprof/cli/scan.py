"""``dmlprof scan MODEL.py``: run a training step (or a script) and report where each op ran."""
from __future__ import annotations

from dmlprof.backends import DEVICE_CHOICES
from dmlprof.cli.arguments import add_adapter_flag, add_target_flags, add_model_argument, add_script_flags, at_least, seconds
from dmlprof.output import add_progress_flag
from dmlprof.distributed.env import MAX_LOCAL_RANKS

EXAMPLES = """examples:
  dmlprof scan models/resnet18.py --target dml          predict DirectML's fallbacks (no GPU needed)
  dmlprof scan models/lenet5.py --device emulated-dml   run on the emulated DirectML device
  dmlprof scan train.py --device dml -- --epochs 1      a script and its own arguments
  dmlprof scan -m mypackage.train --target dml          a script run as python -m runs it
  dmlprof scan models/net.py --json - | jq .summary     the JSON report on standard output
  dmlprof scan models/net.py --device dml --verify      recompute each op on the CPU (exit 5 if results differ)
"""


def add_parser(commands) -> None:
    parser = commands.add_parser("scan", help="scan a model file or script", description=__doc__, epilog=EXAMPLES)
    add_model_argument(parser, "a model file (build_model, make_batch) or any training script")
    parser.add_argument("--device", default="auto", choices=DEVICE_CHOICES, help="device to run on (default: auto)")
    add_target_flags(parser, "predict coverage on a device you do not have")
    add_adapter_flag(parser)
    parser.add_argument("--batch-size", type=at_least(1), help="batch size (default: the file's BATCH_SIZE, else 16)")
    parser.add_argument("--steps", type=at_least(1), help="measured training steps; in a script, optimizer steps "
                        "(default 3; 1 with --target)")
    parser.add_argument("--warmup", type=at_least(0), help="unrecorded steps before measuring (default 1)")
    add_script_flags(parser)
    parser.add_argument("--no-sync", dest="sync", action="store_false",
                        help="do not synchronise the device after each op: faster, times are host-side")
    parser.add_argument("--no-profiler", dest="profiler", action="store_false",
                        help="do not run torch.profiler alongside (no cross-check, no device kernel times)")
    parser.add_argument("--out", default="reports", help="folder for the saved session (default reports/)")
    parser.add_argument("--json", metavar="FILE", help="also write the JSON report (- for standard output)")
    parser.add_argument("--html", metavar="FILE", help="also write the HTML report (- for standard output)")
    parser.add_argument("--tb", metavar="DIR", help="also write a TensorBoard profiler run under DIR")
    parser.add_argument("--trace", metavar="FILE", help="also write every call as a Chrome/Perfetto trace (JSON) to FILE")
    parser.add_argument("--replace", action="store_true", help="scan again with dmlprof's replacements applied and compare")
    parser.add_argument("--confirm", action="store_true",
                        help="with --target dml: replay every distinct call of the predicted step on real torch-directml "
                             "(realdml on Linux, an adapter on Windows) and say which predictions it confirms (exit 5 "
                             "if any is contradicted)")
    parser.add_argument("--verify", action="store_true", help="recompute each device op on the CPU and compare; check optimizer updates land (docs/verify.md)")
    parser.add_argument("--top", type=at_least(1), default=15, help="rows per table in the terminal report")
    parser.add_argument("--quiet", action="store_true", help="print no report nor progress, only where files went")
    add_progress_flag(parser)
    group = parser.add_argument_group("distributed runs (docs/distributed.md)")
    group.add_argument("--nproc", type=at_least(1, MAX_LOCAL_RANKS), metavar="N",
                       help="run N ranks through torch.distributed.run (torchrun) and merge them into one report "
                       f"(at most {MAX_LOCAL_RANKS} here: twice the CPU cores, at least 8)")
    group.add_argument("--comm-timeout", type=seconds(allow_zero=False), metavar="S",
                       help="end a rank stuck at a collective for S seconds, naming the rank it waits for (default 600)")
    group.add_argument("--dist-backend", choices=["auto", "gloo", "nccl"],
                       help="process group of a model file's DDP step (default auto: nccl when each rank has a GPU, else gloo)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from dmlprof.cli.arguments import resolve_model
    from dmlprof.output import print_report, print_saved, progress_bars
    from dmlprof.distributed.env import rank_info
    from dmlprof.errors import UsageError
    from dmlprof.model_file import inspect_model_file

    resolve_model(args)
    # a missing file or a syntax error is said at once, before torch is imported (seconds on a laptop)
    inspect_model_file(args.model)
    info = rank_info()  # set when torchrun (or dmlprof scan --nproc) started this process as one rank
    if args.nproc is not None:
        if info is not None:
            raise UsageError("--nproc starts the ranks itself: run it outside torchrun")
        from dmlprof.job.launch import launch

        return launch(args)
    if info is not None:
        from dmlprof.job.rank import run_rank

        return run_rank(args, info)
    if args.target and "," in args.target:  # several targets: one short verdict each (docs/targets.md)
        from dmlprof.cli.side_by_side import run_side_by_side

        return run_side_by_side(args)
    if args.target_torch and not args.target:
        raise UsageError("--target-torch names the torch a prediction reads: it needs --target")
    if args.target and args.replace:
        raise UsageError("--replace runs the model twice on a device, so it does not combine with --target (a prediction "
                         "runs nothing): use --device emulated-dml --replace to see the replacements on DirectML's "
                         "op set, on this machine")
    if args.target and args.verify:
        raise UsageError("--verify compares a device's results with the CPU's: it needs a live scan, not --target")
    if args.verify and args.replace:
        raise UsageError("--verify and --replace cannot be combined: verify the plain scan, then the patched one")
    _refuse_a_trace_without_times(args)
    prepare_confirm(args)
    from dmlprof import interrupts

    # to the end: a signal after the session is saved (while the report prints) ends with its line and status
    with interrupts.stopping():
        with progress_bars(args, quiet=args.quiet):
            session, report, written = scan_and_saved_or_confirmed(args)
        print_report(report, args)
        print_saved(written, args)
        confirmation = confirm_scanned(args, session, written.session_path, written.note())
    from dmlprof.runner import loss_problem  # torch: imported once the scan has run

    diverged = loss_problem(session)  # a complete run whose loss went NaN/inf still fails (exit 3)
    if diverged is not None:
        diverged.kept = written.note() if written.problems else None
        raise diverged
    written.raise_problems()
    _raise_if_results_differ(report.verification, written)
    if confirmation is not None and confirmation.contradicted:
        from dmlprof.errors import ResultsDiffer

        error = ResultsDiffer(confirmation.headline, remedy="the confirmation table lists each contradicted call")
        error.kept = written.note()
        raise error
    return 0


def prepare_confirm(args) -> None:
    """``--confirm``: refused where it cannot be kept (no --target, a script, no real torch-directml here), before
    the scan runs; else the capture the prediction fills (``args.capture``)."""
    args.capture = None
    if not getattr(args, "confirm", False):
        return
    from dmlprof.errors import UsageError
    from dmlprof.model_file import inspect_model_file

    if not args.target:
        raise UsageError("--confirm holds a prediction against real torch-directml: it needs --target dml",
                         remedy="on the device itself, --device dml --verify checks each call's result")
    from dmlprof.predict import DML_TARGET

    if args.target != DML_TARGET:  # an XPU or MPS prediction judged by DirectML was '21 of 27 contradicted', exit 5
        raise UsageError(f"--confirm holds DirectML's prediction against real torch-directml: it needs --target "
                         f"{DML_TARGET} alone, not --target {args.target}")
    if inspect_model_file(args.model).mode == "script":
        raise UsageError("--confirm replays a model file's predicted step; a script runs on the emulated device "
                         "under --target", remedy="scan the script with --device dml on real torch-directml")
    from dmlprof.confirm import require_real_directml
    from dmlprof.confirm.signatures import SignatureCapture

    require_real_directml()
    args.capture = SignatureCapture(None, None)


def scan_and_saved_or_confirmed(args):
    """:func:`scan_and_save`; a prediction that stops at a call DirectML refuses is confirmed too (``--confirm``:
    does the real device raise, or end the process, there?) before its error ends the command."""
    from dmlprof.runner import ScanStopped

    try:
        return scan_and_save(args)
    except ScanStopped as stopped:
        if getattr(args, "capture", None) is not None and stopped.session is not None:
            path = next((part.split(" to ", 1)[1] for part in (stopped.kept or "").split("; ")
                         if part.startswith("partial session saved to ")), None)
            from pathlib import Path

            confirm_scanned(args, stopped.session, Path(path) if path else None, stopped.kept)
        raise


def confirm_scanned(args, session, session_path, kept):
    """The prediction's calls replayed on real torch-directml (``--confirm``): printed, and written beside the
    session as ``NAME.confirm.json``; None without --confirm."""
    if getattr(args, "capture", None) is None:
        return None
    import json
    import sys

    from dmlprof.confirm import confirm
    from dmlprof.output import emit, to_stdout
    from dmlprof.render.confirmation import render_confirmation_text

    out = sys.stderr if to_stdout(args) else sys.stdout
    print(f"dmlprof: confirming {len(args.capture.signatures)} call signatures on real torch-directml...",
          file=sys.stderr, flush=True)
    confirmation = confirm(session, args.capture, model=str(args.model))
    emit(render_confirmation_text(confirmation), out, kept=kept)
    if session_path is not None:
        from dmlprof.files import write_atomic

        path = session_path.with_name(session_path.name.replace(".session.json", "") + ".confirm.json")
        write_atomic(path, json.dumps(confirmation.to_dict(), indent=1))
        emit(f"confirmation saved to {path}\n", out, kept=kept)
    return confirmation


def _refuse_a_trace_without_times(args) -> None:
    """A prediction of a model file has calls, not times: a trace of it would be empty, so say so before
    the scan rather than after it (a script's --target dml runs on the emulated device, which has times)."""
    asked = [flag for flag, value in (("--trace", args.trace), ("--tb", args.tb)) if value]
    if not (args.target and asked):
        return
    from dmlprof.errors import UsageError
    from dmlprof.model_file import inspect_model_file

    if inspect_model_file(args.model).mode == "contract":
        raise UsageError(f"{' and '.join(asked)} lay{'s' if len(asked) == 1 else ''} out each call's time, and a "
                         "prediction (--target on a model "
                         "file) has none", remedy="scan on the device, or --device emulated-dml for the host CPU's times")


def scan_and_save(args):
    """Scan (or predict), save the session and write the reports asked for: (session, report, written).

    A run that fails part-way still saves what it recorded, then raises (its error line says where).
    """
    from dmlprof import interrupts
    from dmlprof.output import check_paths, script_output_to_stderr, write_outputs
    from dmlprof.report import build_report
    from dmlprof.runner import ScanStopped

    check_paths(args, inputs=[args.model])
    interrupts.forget_held()
    with interrupts.stopping():  # SIGTERM and SIGHUP end the run as Ctrl-C does, keeping what was recorded
        try:
            with script_output_to_stderr(args):
                session = _scan(args)
        except ScanStopped as stopped:  # the run failed part-way: keep what was recorded (or predicted), then say why
            with interrupts.saving():  # a second Ctrl-C (or SIGTERM) must not lose the partial session
                written = write_outputs(stopped.session, args)
            stopped.kept = written.note(partial=bool(stopped.session.meta.partial))
            if stopped.session.meta.device_failure is not None:  # the device refused a call: the report leads with it
                from dmlprof.output import print_report

                print_report(build_report(stopped.session), args)
            raise
        with interrupts.saving():
            report = build_report(session)  # once, for the terminal and every file
            written = write_outputs(session, args, report)
    args.kept = written.note()  # if printing the report fails, the error line still says where the session is
    stop = interrupts.held_stop()
    if stop is not None:  # a signal reached the finished run while it was processed or saved: it ends so now
        error = interrupts.cause_of(stop, "interrupted while the finished run was saved (the session is complete)")
        error.kept = written.note()
        raise error
    return session, report, written


def _raise_if_results_differ(verification, written) -> None:
    """``--verify`` that found wrong results fails the run (exit 5), after the report and the files."""
    if verification is None or verification.clean:
        return
    from dmlprof.errors import ResultsDiffer

    error = ResultsDiffer(verification.headline, remedy="the report lists each op and parameter; docs/verify.md")
    error.kept = written.note()
    raise error


def _scan(args):
    script_options = {"script_args": args.script_args, "run_to_end": args.run_to_end, "remap_from": args.remap_from,
                      **({"module": args.module} if args.module else {})}
    if args.adapter and not args.target:
        from dmlprof.errors import UsageError

        raise UsageError("--adapter says which DirectML adapter a prediction assumes: it needs --target dml")
    if args.target:
        from dmlprof.predict import predict_scan

        _say_a_script_runs_emulated(args)
        return predict_scan(args.model, target=args.target, batch_size=args.batch_size, steps=args.steps,
                            warmup=args.warmup, float64=args.adapter == "float64",
                            **({"capture": args.capture} if getattr(args, "capture", None) is not None else {}),
                            target_torch=getattr(args, "target_torch", None), **script_options)
    from dmlprof.runner import scan

    if args.replace:
        from dmlprof.replaced_scan import scan_replaced as scan  # scans twice, plain and patched
    return scan(
        args.model, args.device, batch_size=args.batch_size, sync=args.sync, profiler=args.profiler,
        **_step_options(args), **script_options, **({"verify": True} if args.verify else {}),
    )


def _say_a_script_runs_emulated(args) -> None:
    """``--target dml`` predicts a model file; a script needs values, so it runs on the emulated device
    instead: say so before it runs, not in a note at the end of the report."""
    import sys

    from dmlprof.model_file import inspect_model_file
    from dmlprof.predict import DML_TARGET

    # (another target refuses a script: it has no emulated device, and predict_scan says so)
    if args.target == DML_TARGET and inspect_model_file(args.model).mode == "script":
        print(f"dmlprof: {args.model} is a script: --target {args.target} runs it on the emulated DirectML device "
              "(torch-directml's kernels on the host CPU: its verdicts are the device's, its times the CPU's)",
              file=sys.stderr, flush=True)


def _step_options(args) -> dict:
    """The step counts the user gave; the library's defaults otherwise."""
    return {name: getattr(args, name) for name in ("steps", "warmup") if getattr(args, name) is not None}
