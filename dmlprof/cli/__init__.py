"""The command line: parse, call the library, map known errors to one line.

Each command lives in its own module exposing ``add_parser(subparsers)`` and
``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from dmlprof import __version__
from dmlprof.errors import DmlprofError

COMMANDS = ("scan", "check", "report", "ops", "sweep", "view", "doctor")
EXAMPLES = """examples:
  dmlprof scan models/resnet18.py --target dml        what would fall back on DirectML (no GPU needed)
  dmlprof scan train.py --device dml -- --epochs 1    a training script, on a DirectML GPU
  dmlprof scan models/groupnorm_net.py --device emulated-dml --replace   fallbacks, then with the fixes
  dmlprof check models/net.py --target dml --max-fallback-ops 0           a CI gate (exit 6 past a limit)
  dmlprof report reports/resnet18-dml-*.session.json --html report.html   re-render a saved scan

'dmlprof COMMAND --help' says more about each command.
"""
#: reST markup in module docstrings (``code``, `name`, :func:`x`) that --help shows as plain text
_MARKUP = re.compile(r":\w+:`~?([^`]*)`|``([^`]*)``|`([^`]*)`")


def _load(name):
    try:
        return importlib.import_module(f"dmlprof.cli.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"dmlprof.cli.{name}":
            return None
        raise


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line, like every other error."""

    def error(self, message):
        self.exit(2, f"dmlprof: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dmlprof",
        description="Where each op of your PyTorch training step ran, what it cost, and what to change.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dmlprof {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = _load(name)
        if module is not None:
            module.add_parser(commands)
    for command in commands.choices.values():
        _plain_help(command)
    return parser


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """A command's --help as its docstring reads, line breaks kept, without reST markup."""
    parser.description = plain_text(parser.description)
    parser.epilog = plain_text(parser.epilog)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def plain_text(text):
    """``text`` without reST markup: ``code`` and :func:`name` become code and name."""
    return _MARKUP.sub(lambda m: next(g for g in m.groups() if g is not None), text) if text else text


def _utf8_console() -> None:
    # Windows consoles may be cp1252: never let an odd character crash a report.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass


def main(argv=None) -> int:
    _utf8_console()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" belongs to the user's script, untouched.
    script_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    args.script_args = script_args
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except DmlprofError as err:
        _error_line(err.one_line(), _kept(err))
        return err.exit_code
    except KeyboardInterrupt:
        print("dmlprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        silence_stdout()  # the reader left (| head): not an error
        return 0


def _kept(err: DmlprofError):
    """What the failed run still saved: ``partial session saved to X; not written: ...``."""
    kept = getattr(err, "kept", None)
    if kept is None and getattr(err, "saved_to", None):
        kept = f"partial session saved to {err.saved_to}"
    return kept


def _error_line(message: str, kept=None) -> None:
    print(f"dmlprof: error: {message}" + (f" [{kept}]" if kept else ""), file=sys.stderr)
    sys.stderr.flush()


def silence_stdout() -> None:
    """Point stdout at the null device after it failed: Python flushes it again at exit, and what
    failed once would fail there, with a traceback."""
    try:
        devnull = open(os.devnull, "w", encoding="utf-8")
        os.dup2(devnull.fileno(), sys.stdout.fileno())
        sys.stdout = devnull
    except (OSError, ValueError, AttributeError):
        pass


def entry() -> None:
    sys.exit(main())
