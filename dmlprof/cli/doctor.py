"""``dmlprof doctor``: check what is installed, what will break on your device, and what to change."""
from __future__ import annotations

from dmlprof.backends import DEVICE_CHOICES


def add_parser(commands) -> None:
    parser = commands.add_parser("doctor", help="check the set-up: versions, devices, settings that fail",
                                 description=__doc__)
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="training scripts or model files to read (never run) for settings and calls that a DirectML scan "
                             "stops on or flags")
    parser.add_argument("--device", default="auto", choices=DEVICE_CHOICES,
                        help="the device you will scan on (default: what --device auto picks)")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON instead of a table")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any check fails, not only a blocking one")
    parser.add_argument("--no-probe", dest="probe", action="store_false",
                        help="do not ask torch-directml for its adapters (the probe runs in a child process)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from pathlib import Path

    from dmlprof.doctor.gather import gather_snapshot
    from dmlprof.doctor.table import exit_code, render_table, run_checks, to_json
    from dmlprof.errors import UsageError

    from dmlprof.model_file import parse_python

    for name in args.files:
        if not Path(name).is_file():
            raise UsageError(f"{name}: no such file")
        parse_python(Path(name))  # read as text, so a file Python cannot parse is said so, where, not passed over
    snapshot = gather_snapshot(device=args.device, files=args.files, probe=args.probe)
    rows = run_checks(snapshot)
    print(to_json(rows, snapshot, args.strict) if args.json else render_table(rows))
    return exit_code(rows, args.strict)
