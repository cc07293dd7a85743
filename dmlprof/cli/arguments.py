"""Number types for argparse: a bad value is a one-line usage error (exit 2), never a traceback later.

``type=at_least(1)`` and friends check the value where it is parsed, so NaN,
infinities, negative counts and values past what the machine can represent
(int64) never reach the code that would choke on them.
"""
from __future__ import annotations

import argparse
import math

#: the largest count anything in dmlprof passes on (torch sizes are int64)
INT64_MAX = 2**63 - 1


def at_least(low: int, high: int = INT64_MAX):
    """A whole number from ``low`` to ``high``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is too small (at least {low})")
        if value > high:
            raise argparse.ArgumentTypeError(f"{text} is too large (at most {high})")
        return value

    parse.__name__ = f"whole number >= {low}"
    return parse


def seconds(allow_zero: bool):
    """A finite number of seconds, positive (or also 0 when ``allow_zero``: 'no limit')."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number of seconds"
                                             + (" (0 means no limit)" if allow_zero else ""))
        if value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"{text} must be {'0 or more' if allow_zero else 'more than 0'} seconds")
        return value

    parse.__name__ = "seconds"
    return parse


def port_number(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    return at_least(0, 65535)(text)


#: ``--adapter``: the DirectML adapter class a prediction assumes (what fails depends on it)
ADAPTERS = ("no-float64", "float64")


def add_adapter_flag(parser) -> None:
    """``--adapter``, for the commands that predict (``--target dml``)."""
    parser.add_argument("--adapter", choices=ADAPTERS, default=None,
                        help="with --target dml, the adapter class to predict for: no-float64 (the default; many "
                             "integrated GPUs, Intel's above all, run no double precision) or float64 (adapters that "
                             "do); what fails on DirectML depends on it")


def target_list(text: str) -> str:
    """``--target``: one target or several, comma-separated (``dml,xpu,mps``), each one dmlprof knows."""
    from dmlprof.predict import known_targets  # torch-free: the targets are named by their tables

    names = [name.strip().lower() for name in text.split(",")]
    if len(names) > 1 and not all(names):  # "dml,,mps" or "dml,": a name left out, not a list to guess at
        raise argparse.ArgumentTypeError(f"{text!r} has an empty name between its commas; write the targets "
                                         "as dml,xpu,mps")
    names = [name for name in names if name]
    unknown = [name for name in names if name not in known_targets()]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown target {', '.join(unknown) or repr(text)}; choose from "
                                         f"{', '.join(known_targets())}, or several with commas (dml,xpu,mps)")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a target twice")
    return ",".join(names)


def add_target_flags(parser, what: str) -> None:
    """``--target`` and ``--target-torch``, for the commands that predict (scan, check)."""
    parser.add_argument("--target", type=target_list, metavar="T[,T...]",
                        help=f"{what} (no device needed): dml, or a target read from a torch wheel's registrations "
                             "(xpu, mps); several, comma-separated, side by side")
    parser.add_argument("--target-torch", metavar="VERSION",
                        help="the torch whose registrations --target xpu/mps reads (default: the newest shipped)")


def add_script_flags(parser) -> None:
    """``--from`` and ``--run-to-end``, for the commands that run a training script (scan, check)."""
    parser.add_argument("--from", dest="remap_from", choices=["cuda", "mps"],
                        help="a script written for this device runs on the scanned one: its device requests "
                        "(\"cuda\", .cuda(), torch.cuda.*) are answered by it")
    parser.add_argument("--run-to-end", action="store_true",
                        help="after the recorded steps, let a script finish (unrecorded) instead of stopping it")


def add_model_argument(parser, what: str) -> None:
    """The file to scan, or ``-m MODULE`` as ``python -m`` takes it (scan, check)."""
    parser.add_argument("model", nargs="?", help=f"{what}; a script's own arguments go after --")
    parser.add_argument("-m", dest="module", metavar="MODULE",
                        help="run a script as python -m MODULE does (package.train; its own arguments after --)")


def resolve_model(args) -> None:
    """``args.model`` from ``-m MODULE`` (the file Python would run), or a usage error when the two are
    missing or both given."""
    from dmlprof.errors import UsageError

    module = getattr(args, "module", None)
    if module and args.model:
        raise UsageError(f"give a file or -m MODULE, not both ({args.model} and -m {module})",
                         remedy="a script's own arguments go after --")
    if module:
        from dmlprof.model_file import module_file

        args.model = str(module_file(module))
    elif not args.model:
        raise UsageError("no model file or script given", remedy=f"dmlprof {args.command} FILE, or -m MODULE")
