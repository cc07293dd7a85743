"""``dmlprof sweep MODEL.py``: throughput, step time and peak memory per batch size; picks one."""
from __future__ import annotations

import argparse
import os
import sys

from dmlprof.backends import DEVICE_CHOICES
from dmlprof.cli.arguments import at_least, seconds
from dmlprof.output import add_progress_flag

#: the child memory cap can also come from the environment (handy in CI)
MEMORY_LIMIT_ENV = "DMLPROF_SWEEP_CHILD_MEMORY_LIMIT"


def add_parser(commands) -> None:
    from dmlprof.sweep.options import (DEFAULT_CHILD_TIMEOUT_S, DEFAULT_MAX_BATCH_SIZE, DEFAULT_STEPS,
                                       DEFAULT_TIME_BUDGET_S, DEFAULT_WARMUP)

    parser = commands.add_parser(
        "sweep", help="measure a model file over batch sizes and recommend one", description=__doc__,
        epilog="Each size runs in its own process, so running out of memory is a result, not a crash. "
               "Schema of --json: docs/sweep_schema.md.",
    )
    parser.add_argument("model", help="a model file (build_model, make_batch)")
    sizes = parser.add_mutually_exclusive_group(required=True)
    sizes.add_argument("--batch-sizes", metavar="N,N,...", help="the sizes to measure, e.g. 8,16,32,64")
    sizes.add_argument("--auto", action="store_true",
                       help="double from a start size until out of memory, over the memory budget, "
                            "--max-batch-size or --time-budget")
    parser.add_argument("--start-batch-size", type=at_least(1), metavar="N",
                        help="--auto: first size (default: the file's BATCH_SIZE / 4, else 1)")
    parser.add_argument("--max-batch-size", type=at_least(1), default=DEFAULT_MAX_BATCH_SIZE, metavar="N",
                        help=f"--auto: largest size to try (default {DEFAULT_MAX_BATCH_SIZE})")
    parser.add_argument("--time-budget", type=seconds(allow_zero=True), default=DEFAULT_TIME_BUDGET_S, metavar="S",
                        help=f"--auto: do not start a size likely to end past S seconds (default {DEFAULT_TIME_BUDGET_S:.0f}; 0: no limit)")
    parser.add_argument("--device", default="auto", choices=DEVICE_CHOICES, help="device to run on (default: auto)")
    parser.add_argument("--devices", metavar="I,J,...",
                        help="sweep on several devices of that kind at once (indices, e.g. 0,1): one child per device")
    parser.add_argument("--steps", type=at_least(1), default=DEFAULT_STEPS, help=f"timed steps per size (default {DEFAULT_STEPS})")
    parser.add_argument("--warmup", type=at_least(0), default=DEFAULT_WARMUP, help=f"warm-up steps per size (default {DEFAULT_WARMUP})")
    parser.add_argument("--amp", choices=["fp16", "bf16"], help="mixed precision with the backend's torch.autocast")
    parser.add_argument("--memory-budget", metavar="SIZE",
                        help="peak memory allowed for the recommendation: bytes, 8GiB, 512MB, or a share "
                             "like 0.5 or 50%% of device memory (default 70%%; on the CPU, of physical memory)")
    parser.add_argument("--child-memory-limit", metavar="SIZE",
                        help="cap each child's address space at SIZE more than it holds once torch is loaded "
                             f"(RLIMIT_AS; Linux only, ignored with a note elsewhere; also ${MEMORY_LIMIT_ENV})")
    parser.add_argument("--child-timeout", type=seconds(allow_zero=False), default=DEFAULT_CHILD_TIMEOUT_S, metavar="S",
                        help=f"give up on one size after S seconds (default {DEFAULT_CHILD_TIMEOUT_S:.0f})")
    parser.add_argument("--out", default="reports", help="folder for the saved session (default reports/)")
    parser.add_argument("--json", metavar="FILE", help="also write the sweep as JSON (docs/sweep_schema.md; - for standard output)")
    parser.add_argument("--html", metavar="FILE", help="also write the HTML report (- for standard output)")
    parser.add_argument("--quiet", action="store_true", help="print no table nor progress, only where files went")
    add_progress_flag(parser)
    parser.set_defaults(handler=run)


def run(args) -> int:
    from dmlprof.output import check_paths, progress_bars
    from dmlprof.sweep.driver import run_sweep
    from dmlprof.sweep.options import parse_batch_sizes, parse_bytes, parse_memory_budget

    check_paths(args, inputs=[args.model])
    batch_sizes = parse_batch_sizes(args.batch_sizes) if args.batch_sizes else None
    budget = parse_memory_budget(args.memory_budget)
    limit_text = args.child_memory_limit or os.environ.get(MEMORY_LIMIT_ENV) or None
    child_memory_limit = parse_bytes(limit_text, "--child-memory-limit") if limit_text else None
    options = dict(
        batch_sizes=batch_sizes, auto=args.auto, start_batch_size=args.start_batch_size,
        max_batch_size=args.max_batch_size, steps=args.steps, warmup=args.warmup, amp=args.amp,
        memory_budget=budget, child_memory_limit=child_memory_limit,
        time_budget_s=args.time_budget or None, child_timeout_s=args.child_timeout,
    )
    if args.devices:
        return _run_devices(args, options)
    from dmlprof import interrupts

    with interrupts.stopping():  # SIGTERM and SIGHUP end the sweep as Ctrl-C does: the sizes measured are kept
        with progress_bars(args, quiet=args.quiet):
            result = run_sweep(args.model, args.device, **options)
        with interrupts.saving():
            session = result.to_session()
            written = _save(args, session)
    return _finish(args, result, session=session, written=written)


def _run_devices(args, options) -> int:
    """``--devices 0,1``: the sweep on each device at once; one session, table and JSON document per device."""
    import json

    from dmlprof.output import Written, print_saved, write_output
    from dmlprof.errors import UsageError
    from dmlprof.plain import plain
    from dmlprof.report import build_report
    from dmlprof.sweep.driver import run_sweep_devices

    try:
        devices = [int(part) for part in args.devices.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--devices: {args.devices!r} is not a list of device indices (example: --devices 0,1)") from None
    if args.html:
        raise UsageError("--html writes one sweep; with --devices use --json (one document per device)")
    results = run_sweep_devices(args.model, args.device, devices, **options)
    json_path, args.json = args.json, None
    codes = [_finish(args, result, heading=f"device {index}") for index, result in zip(devices, results)]
    if json_path:
        documents = [build_report(result.to_session()).to_dict() for result in results]
        written = Written()
        write_output(written, json_path, lambda: json.dumps(
            plain({"format": "dmlprof-sweep-devices", "devices": documents}), indent=2, allow_nan=False), "JSON document")
        print_saved(written, args)
        written.raise_problems()
    return max(codes)


def _save(args, session):
    from dmlprof.output import save_session

    return save_session(session, args)


def _finish(args, result, heading: str = "", session=None, written=None) -> int:
    """Save one sweep's session, write --json/--html, print its table; the exit code.

    The sweep's own outcome (no size ran: 3; interrupted: 130) decides the
    code; an output that could not be written rides along in its line, or is
    the error (2) when the sweep itself went well.
    """
    from dmlprof.output import emit, print_saved, to_stdout, write_reports
    from dmlprof.errors import Interrupted, ModelRaisedError
    from dmlprof.render.terminal import render_text
    from dmlprof.report import build_report

    session = session or result.to_session()
    written = written or _save(args, session)
    report = build_report(session)
    write_reports(session, argparse.Namespace(json=args.json, html=args.html), written, report=report)
    if not args.quiet and not to_stdout(args):
        emit((f"\n[{heading}]\n" if heading else "") + render_text(report), sys.stdout, kept=written.note())
    print_saved(written, args)
    rows = session.sweep["rows"]
    outcome = None
    if rows and all(row["status"] == "error" for row in rows):
        outcome = ModelRaisedError(f"no batch size ran: {rows[0]['error']}")
    elif result.interrupted and written.problems:
        outcome = Interrupted("interrupted")
    if outcome is not None:
        outcome.kept = written.note() if written.problems else None
        raise outcome
    written.raise_problems()
    return 130 if result.interrupted else 0
