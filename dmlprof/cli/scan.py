"""``dmlprof scan MODEL.py``: run a training step (or a script) and report where each op ran."""
from __future__ import annotations

from dmlprof.backends import DEVICE_CHOICES
from dmlprof.cli.arguments import at_least
from dmlprof.cli.output import add_progress_flag

EXAMPLES = """examples:
  dmlprof scan models/resnet18.py --target dml          predict DirectML's fallbacks (no GPU needed)
  dmlprof scan models/lenet5.py --device emulated-dml   run on the emulated DirectML device
  dmlprof scan train.py --device dml -- --epochs 1      a script and its own arguments
  dmlprof scan models/net.py --json - | jq .summary     the JSON report on standard output
  dmlprof scan models/net.py --device dml --verify      recompute each op on the CPU (exit 5 if results differ)
"""


def add_parser(commands) -> None:
    parser = commands.add_parser("scan", help="scan a model file or script", description=__doc__, epilog=EXAMPLES)
    parser.add_argument("model", help="a model file (build_model, make_batch) or any training script; "
                        "a script's own arguments go after --")
    parser.add_argument("--device", default="auto", choices=DEVICE_CHOICES, help="device to run on (default: auto)")
    parser.add_argument("--target", choices=["dml"], help="predict coverage on a device you do not have (no device needed)")
    parser.add_argument("--batch-size", type=at_least(1), help="batch size (default: the file's BATCH_SIZE, else 16)")
    parser.add_argument("--steps", type=at_least(1), help="measured training steps; in a script, optimizer steps "
                        "(default 3; 1 with --target)")
    parser.add_argument("--warmup", type=at_least(0), help="unrecorded steps before measuring (default 1)")
    parser.add_argument("--from", dest="remap_from", choices=["cuda", "mps"],
                        help="a script written for this device runs on the scanned one: its device requests "
                        "(\"cuda\", .cuda(), torch.cuda.*) are answered by it")
    parser.add_argument("--run-to-end", action="store_true",
                        help="after the recorded steps, let a script finish (unrecorded) instead of stopping it")
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
    parser.add_argument("--verify", action="store_true", help="recompute each device op on the CPU and compare; check optimizer updates land (docs/verify.md)")
    parser.add_argument("--top", type=at_least(1), default=15, help="rows per table in the terminal report")
    parser.add_argument("--quiet", action="store_true", help="print no report nor progress, only where files went")
    add_progress_flag(parser)
    group = parser.add_argument_group("distributed runs (docs/distributed.md)")
    group.add_argument("--nproc", type=int, metavar="N",
                       help="run N ranks through torch.distributed.run (torchrun) and merge them into one report")
    group.add_argument("--comm-timeout", type=float, metavar="S",
                       help="end a rank stuck at a collective for S seconds, naming the rank it waits for (default 600)")
    group.add_argument("--dist-backend", choices=["auto", "gloo", "nccl"],
                       help="process group of a model file's DDP step (default auto: nccl when each rank has a GPU, else gloo)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from dmlprof.cli.output import print_report, print_saved, progress_bars
    from dmlprof.distributed.env import rank_info
    from dmlprof.errors import UsageError
    from dmlprof.runner import loss_problem

    info = rank_info()  # set when torchrun (or dmlprof scan --nproc) started this process as one rank
    if args.nproc is not None:
        if info is not None:
            raise UsageError("--nproc starts the ranks itself: run it outside torchrun")
        from dmlprof.distributed.launch import launch

        return launch(args)
    if info is not None:
        from dmlprof.distributed.rank import run_rank

        return run_rank(args, info)
    if args.target and args.replace:
        raise UsageError("--replace runs the model twice on a device; it does not combine with --target")
    if args.target and args.verify:
        raise UsageError("--verify compares a device's results with the CPU's: it needs a live scan, not --target")
    if args.verify and args.replace:
        raise UsageError("--verify and --replace cannot be combined: verify the plain scan, then the patched one")
    with progress_bars(args, quiet=args.quiet):
        session, report, written = scan_and_save(args)
    print_report(report, args)
    print_saved(written, args)
    diverged = loss_problem(session)  # a complete run whose loss went NaN/inf still fails (exit 3)
    if diverged is not None:
        diverged.kept = written.note() if written.problems else None
        raise diverged
    written.raise_problems()
    _raise_if_results_differ(report.verification, written)
    return 0


def scan_and_save(args):
    """Scan (or predict), save the session and write the reports asked for: (session, report, written).

    A run that fails part-way still saves what it recorded, then raises (its error line says where).
    """
    from dmlprof import interrupts
    from dmlprof.cli.output import check_paths, write_outputs
    from dmlprof.errors import Interrupted
    from dmlprof.report import build_report
    from dmlprof.runner import ScanStopped

    check_paths(args, inputs=[args.model])
    try:
        session = _scan(args)
    except ScanStopped as stopped:  # the run failed part-way: keep what was recorded (or predicted), then say why
        if isinstance(stopped.cause, Interrupted):
            with interrupts.saving():  # a second Ctrl-C must not lose the partial session
                written = write_outputs(stopped.session, args)
        else:
            written = write_outputs(stopped.session, args)
        stopped.kept = written.note(partial=True)
        raise
    report = build_report(session)  # once, for the terminal and every file
    written = write_outputs(session, args, report)
    args.kept = written.note()  # if printing the report fails, the error line still says where the session is
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
    script_options = {"script_args": args.script_args, "run_to_end": args.run_to_end, "remap_from": args.remap_from}
    if args.target:
        from dmlprof.predict import predict_scan

        return predict_scan(args.model, target=args.target, batch_size=args.batch_size, steps=args.steps,
                            warmup=args.warmup, **script_options)
    from dmlprof.runner import scan

    if args.replace:
        from dmlprof.replaced_scan import scan_replaced as scan  # scans twice, plain and patched
    return scan(
        args.model, args.device, batch_size=args.batch_size, sync=args.sync, profiler=args.profiler,
        **_step_options(args), **script_options, **({"verify": True} if args.verify else {}),
    )


def _step_options(args) -> dict:
    """The step counts the user gave; the library's defaults otherwise."""
    return {name: getattr(args, name) for name in ("steps", "warmup") if getattr(args, name) is not None}
