"""The command line: parse, call the library, map known errors to one line.

Each command lives in its own module exposing ``add_parser(subparsers)`` and
``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import shlex
import sys

from dmlprof import __version__
from dmlprof.errors import DmlprofError
from dmlprof.output import error_line, silence_stdout

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


#: the commands that run a user's script, whose own arguments go after ``--``
SCRIPT_COMMANDS = ("scan", "check")
#: how alike a mistyped flag or command and the real one must be for "did you mean" (difflib's ratio)
CLOSE_ENOUGH = 0.75
CLOSE_CHOICE = 0.6
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line, like every other error."""

    def error(self, message):
        self.exit(2, f"dmlprof: error: {message}{_choice_hint(message)} (see '{self.prog} --help')\n")


def _choice_hint(message: str) -> str:
    """``; did you mean scan?`` after argparse's "invalid choice" for a mistyped command or value."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return ""
    choices = [choice.strip("'") for choice in found.group(2).split(", ")]  # quoted or not, by Python version
    # choices are short words ("dml", "cuda"): one swapped letter is already far in difflib's ratio
    close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=CLOSE_CHOICE)
    return f"; did you mean {close[0]}?" if close else ""


def _unrecognized(parser: argparse.ArgumentParser, args, extras: list) -> None:
    """argparse's "unrecognized arguments" (exit 2), with what the user most likely meant: a flag of the
    command spelled otherwise (did you mean), and for a script, that its own arguments go after ``--``."""
    command = parser.commands.choices.get(args.command, parser) if args.command else parser
    flags = [flag for action in command._actions for flag in action.option_strings]
    guesses, unknown_flags = [], False
    for extra in extras:
        name = extra.split("=", 1)[0]
        if not name.startswith("-"):
            continue
        close = difflib.get_close_matches(name, flags, n=1, cutoff=CLOSE_ENOUGH)
        elsewhere = [] if close else _commands_with_flag(parser, name)
        guesses += [f"{name}: did you mean {close[0]}?"] if close else []
        # a flag of another command: its value was read as this command's next argument, so say whose it is
        guesses += [f"{name} is an option of dmlprof {' and '.join(elsewhere)}, not of {args.command}"] \
            if elsewhere and args.command else []
        unknown_flags = unknown_flags or not (close or elsewhere)
    message = f"unrecognized arguments: {shlex.join(extras)}" + "".join(f"; {guess}" for guess in guesses)
    if args.command in SCRIPT_COMMANDS and (unknown_flags or not guesses):
        model = getattr(args, "model", None) or "train.py"
        message += (f"; a script's own arguments go after --: dmlprof {args.command} {shlex.quote(model)} -- "
                    f"{shlex.join(extras)}")
    command.error(message)


def _commands_with_flag(parser: argparse.ArgumentParser, flag: str) -> list:
    return [name for name, command in parser.commands.choices.items()
            if any(flag in action.option_strings for action in command._actions)]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dmlprof",
        description="Where each op of your PyTorch training step ran, what it cost, and what to change.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dmlprof {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    parser.commands = commands  # each command's parser, for the hints after a usage mistake
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
    from_command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    whole_argv = list(argv)
    # Everything after the first "--" belongs to the user's script, untouched.
    script_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unrecognized(parser, args, extras)
    args.script_args = script_args
    if not args.command:
        parser.print_help()
        return 2
    from dmlprof import survival

    if args.command in survival.COMMANDS:
        # from the command line, the scan runs in a child: a native crash there cannot take its recording (a
        # program calling main(argv) itself gets the scan in its own process, as it asked)
        if from_command_line and survival.wanted(args):
            supervised = survival.supervise(whole_argv, args)
            if supervised is not None:
                return supervised
        survival.in_child()
    code = 2
    try:
        if args.command in survival.COMMANDS:
            from dmlprof import interrupts

            # a scan's SIGTERM/SIGHUP past its own handling (between its saved report and its exit code) ends as
            # Ctrl-C does there, with its line and status: by the default action, the supervisor found a child dead
            # without its last word and saved a second, "partial" session of a complete run
            with interrupts.stopping():
                code = _run(args)
        else:
            code = _run(args)
        return code
    finally:
        survival.child_finished(code)


def _run(args) -> int:
    try:
        return int(args.handler(args) or 0)
    except DmlprofError as err:
        _last_line(err.one_line(), _kept(err))
        return err.exit_code
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM/SIGHUP where a command turned them into one
        from dmlprof import interrupts, survival

        kept = getattr(args, "kept", None)
        said = ("interrupted" if not isinstance(stop, interrupts.Stopped) else
                f"stopped by {interrupts.signal_name(stop.signum)}")
        # a scan that saved nothing (stopped while torch loaded, or the model was built) says so, as one that did
        # names what it kept
        _last_line(said + (": nothing was saved" if kept is None and args.command in survival.COMMANDS else ""), kept)
        return interrupts.exit_code(stop)
    except BrokenPipeError:
        silence_stdout()  # the reader left (| head): not an error
        return 0
    except MemoryError:  # beyond what a run sets aside (dmlprof.record.budget): still one line, not a traceback
        _out_of_memory_line(getattr(args, "kept", None))
        return 4


def _last_line(line: str, kept) -> None:
    """The command's error line, which a second Ctrl-C (a terminal's, then a forwarded one; an impatient user)
    must not turn into a traceback: stop signals are ignored while it is written, the command ending anyway."""
    import signal

    from dmlprof import interrupts

    previous = interrupts.handle((signal.SIGINT,) + interrupts.STOP_SIGNALS, signal.SIG_IGN)
    try:
        error_line(line, kept)
    finally:
        interrupts.restore(previous)


def _out_of_memory_line(kept) -> None:
    """The one line for a MemoryError dmlprof could not handle where it arose: written with nothing to import
    and no formatting to allocate for, since the memory is gone."""
    line = "dmlprof: error: dmlprof ran out of memory (close other programs, or scan fewer steps: --steps)"
    try:
        os.write(2, (line + (f" [{kept}]" if kept else "") + "\n").encode("utf-8", "replace"))
    except (OSError, MemoryError):
        pass


def _kept(err: DmlprofError):
    """What the failed run still saved: ``partial session saved to X; not written: ...``."""
    kept = getattr(err, "kept", None)
    if kept is None and getattr(err, "saved_to", None):
        kept = f"partial session saved to {err.saved_to}"
    return kept


def entry() -> None:
    code = main()
    # a script cut short must not keep the process waiting (user_code.exit_process); a process that ran none (the
    # supervisor of a scan's child, `report`, `doctor`) has not imported it, and must not import torch for it
    # (5 s a scan)
    user_code = sys.modules.get("dmlprof.runner.user_code")
    if user_code is None:
        sys.exit(code)
    user_code.exit_process(code)
