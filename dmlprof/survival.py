"""A scan that survives anything: the user's code runs in a child process, its recording in a journal.

A native crash (a SIGSEGV in torch-directml, a glog ``abort()``, a device removed, the user's own
ctypes) ends the process on the spot, and no rule list can know every call that does it. So
``dmlprof scan`` and ``dmlprof check`` run the whole command again in a child process, which writes
every recorded call down as it happens (:mod:`dmlprof.record.journal`) and Python's stack to a crash
log at its death (:mod:`faulthandler`). When the child ends on its own terms (a report, an error
line, any exit code) the parent only passes its exit code on. When it dies, the parent reads what it
left and finishes the scan for it: the report of every call recorded, the call that was running
named (op, dtypes, shapes, module, the user's line), one error line naming the signal, the partial
session, and exit code 7 (docs/exit_codes.md).

The parent imports neither torch nor the user's code until it has to salvage a dead child's journal.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from dmlprof.files import shown_path
from dmlprof.record.journal import JOURNAL_ENV

#: the commands whose scan runs in a supervised child
COMMANDS = ("scan", "check")
#: set in the child: it is the scan, not its supervisor
CHILD_ENV = "DMLPROF_SUPERVISED"
#: set by a user (or a test) to run a scan in one process, as before: a native crash then loses it
NO_SUPERVISOR_ENV = "DMLPROF_NO_SUPERVISOR"
#: where the child's faulthandler writes Python's stack when it dies
CRASH_LOG_ENV = "DMLPROF_CRASH_LOG"
#: the exit code of a scan whose process died (docs/exit_codes.md)
CRASHED_EXIT_CODE = 7
#: the exit code of a run that ended at a call the device refused (docs/exit_codes.md: DeviceError's)
REFUSED_EXIT_CODE = 4
#: how a child ended that exited without its last word (``abort()`` on Windows, a native ``exit()``, an ``os._exit``
#: outside the scan's run): the recording is salvaged, the exit status stands as a script's would (0, else 3; a model
#: file's is 3)
ABRUPT = "an abrupt exit"

# Windows reports a crash as the NTSTATUS of the exception that ended the process.
_WINDOWS_CRASHES = {
    0xC0000005: "an access violation", 0xC0000409: "a fatal error (stack buffer overrun or abort)",
    0xC000001D: "an illegal instruction", 0xC00000FD: "a stack overflow", 0xC0000374: "heap corruption",
    0xC0000094: "an integer division by zero",
}
_STOPPING_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
#: a supervisor's journal folder in the temporary folder: the prefix, then the supervisor's pid ("pid123-"; an
#: older dmlprof's folders, named without it, are never taken for a dead supervisor's)
JOURNAL_FOLDER_PREFIX = "dmlprof-journal-pid"
#: a journal folder younger than this is never taken for a dead supervisor's (its lock may not be taken yet)
_STALE_AFTER_S = 60
_STALE_FOLDERS_PER_SCAN = 64
#: this process is a scan's supervised child (:func:`in_child` read the mark, :data:`CHILD_ENV`, and took it away)
_supervised = False
#: the crash log's descriptor faulthandler writes to, and the file it is (device, inode)
_crash_log_fd = None
_crash_log_identity = None
#: the crash log's descriptor number sits this far below the descriptor limit (at most _CRASH_LOG_FD_CEILING): a
#: script that closes what it inherited (os.closerange) frees it, and its own files take the lowest free numbers,
#: not this one, so faulthandler's dump lands in no file of the user's (it fails with EBADF)
_CRASH_LOG_FD_MARGIN = 16
_CRASH_LOG_FD_CEILING = 4096


def wanted(args) -> bool:
    """Whether this command runs its scan in a supervised child (not in the child itself, not a launched
    job's rank or launcher, whose processes are watched by the job, not when the user turned it off)."""
    if os.environ.get(CHILD_ENV) or os.environ.get(NO_SUPERVISOR_ENV):
        return False
    if getattr(args, "nproc", None) is not None:
        return False
    from dmlprof.distributed.env import rank_info

    return rank_info() is None


def in_child() -> None:
    """In the scan's child: its journal opened (before the script can start processes that would inherit
    where it is), and Python's stack to the crash log if the process dies (the user's line). The mark of a
    supervised child is taken out of the environment once read: a ``dmlprof scan`` the script starts is not this
    scan's child, and must supervise its own (it inherited the mark, skipped its supervisor, and lost its
    recording to its script's crash)."""
    global _supervised
    if not os.environ.pop(CHILD_ENV, None):
        return
    _supervised = True
    from dmlprof.record.journal import process_journal

    process_journal()
    path = os.environ.pop(CRASH_LOG_ENV, None)
    if not path:
        return
    import faulthandler

    global _crash_log_fd, _crash_log_identity
    try:
        # kept open: faulthandler writes to the descriptor, at its death, whatever file has that number then
        _crash_log_fd = _high_descriptor(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        found = os.fstat(_crash_log_fd)
        _crash_log_identity = (found.st_dev, found.st_ino)
        faulthandler.enable(_crash_log_fd, all_threads=True)
    except (OSError, RuntimeError, ValueError):
        _crash_log_fd = None
        return
    import atexit

    atexit.register(_close_crash_log)


def _high_descriptor(fd: int) -> int:
    """``fd`` moved to a number near the descriptor limit, where new files do not land (POSIX; else ``fd``)."""
    try:
        import fcntl
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        floor = min(soft if soft > 0 else _CRASH_LOG_FD_CEILING, _CRASH_LOG_FD_CEILING) - _CRASH_LOG_FD_MARGIN
        if floor <= fd:
            return fd
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC if hasattr(fcntl, "F_DUPFD_CLOEXEC") else fcntl.F_DUPFD, floor)
    except (ImportError, OSError, ValueError):  # Windows (no fcntl), or no number free up there
        return fd
    os.close(fd)
    return high


def _close_crash_log() -> None:
    import faulthandler

    faulthandler.disable()
    if _crash_log_fd is None:
        return
    try:
        found = os.fstat(_crash_log_fd)
        if (found.st_dev, found.st_ino) == _crash_log_identity:  # never a file of the user's on that number
            os.close(_crash_log_fd)
    except OSError:  # the scanned code closed its descriptor (os.closerange): nothing is left to close
        pass


def os_exit_journaled(code: int, in_thread: bool = False) -> bool:
    """The scanned code called ``os._exit(code)`` in the scan's child (``in_thread``: a thread other than the main
    one), which ends there as under plain python (nothing of the script's runs after it: no ``finally``, no
    handler): the journal says so and the crash log gets Python's stack (the user's line), and the parent finishes
    the scan from them. False where no parent will (a scan run unsupervised)."""
    if not _supervised:
        return False
    from dmlprof.record.journal import process_journal

    journal = process_journal()
    if journal is None:
        return False
    if _crash_log_fd is not None:
        import faulthandler

        try:
            faulthandler.dump_traceback(_crash_log_fd, all_threads=False)
        except (OSError, ValueError, RuntimeError):
            pass
    journal.os_exit(code, in_thread)
    return True


def child_finished(exit_code: int) -> None:
    """The child ends on its own terms, its report and error line said: its parent has nothing to salvage."""
    if _supervised:
        from dmlprof.record.journal import journal_finished

        journal_finished(exit_code)


def supervise(argv: list, args) -> Optional[int]:
    """Run ``dmlprof ARGV`` in a child; its exit code, or, when it died, the salvaged scan's (7); ``None`` where no
    temporary folder can hold its journal (the scan then runs in this process, as without a supervisor)."""
    try:
        folder = _journal_folder()
    except OSError as exc:  # no usable temporary folder (all read-only or full): tempfile's error was a traceback
        _note(f"the scan runs in dmlprof's own process, unjournaled (a native crash would lose its recording): no "
              f"temporary folder could hold its journal ({exc.strerror or exc}; TMPDIR picks one)")
        return None
    journal, crash_log = folder / "calls.journal", folder / "crash.log"
    env = {**os.environ, CHILD_ENV: "1", JOURNAL_ENV: str(journal), CRASH_LOG_ENV: str(crash_log)}
    # made and held open here: a script that removes the temporary folder (its own clean-up of TMPDIR) removes
    # the names, not the files, and what the child wrote is put back before it is read
    held = {path: _hold(path) for path in (journal, crash_log)}
    _lock(held[crash_log])  # while this process lives: a later scan removes the folder of a supervisor killed
    remove_stale_journal_folders(folder.parent, keep=folder)
    try:
        child = _start([sys.executable, *interpreter_options(), "-m", "dmlprof", *argv], env)
        with _passing_signals_to(child):
            status = child.wait()
        _put_back(folder, held)
        how = died_of(status)
        if how is None:
            from dmlprof.record.journal import last_word

            journaled, said = last_word(journal)
            if said is not None:  # it ended on its own terms
                return _said_stands(said, status)
            if not journaled:  # it had recorded nothing
                return status
            # it ended without its last word: os._exit() from a thread, abort() on Windows (status 3)
            how = ABRUPT
        return salvage(args, journal, crash_log, how, status)
    finally:
        for fd in held.values():
            if fd is not None:
                os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)


def _said_stands(said: int, status: int) -> int:
    """The exit code of a child that said its last word (``said``) and then ended with ``status``: its own. Only an
    ``os._exit`` after it (an exit handler a model file registered, ``atexit.register(os._exit, 0)``, that runs at
    dmlprof's own exit) can make them differ, and it must not turn the scan's finding into a success (re-probe 14,
    case 35). (A code past 255 is the status's 8 bits, as the system keeps them.)"""
    if status in (said, said % 256):
        return status
    _note(f"an exit handler ended the scanned process with status {status} after its scan ended; the scan's own exit "
          f"code, {said}, stands")
    return said


def _lock(fd: Optional[int]) -> bool:
    """An exclusive lock on ``fd``, without waiting; the system lets go of it when this process ends, however it
    ends (SIGKILL too). False where it is held, or cannot be taken (Windows: no flock)."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError, TypeError):
        return False
    return True


def remove_stale_journal_folders(temporary: Path, keep: Optional[Path] = None) -> list:
    """Remove the journal folders of supervisors that were killed (SIGKILL: no ``finally`` ran) and return them:
    only a real folder of this user's, named for a supervisor's pid that no longer runs, older than a minute, whose
    crash log's lock nobody holds (or which has no crash log left). Anything else (another user's, another dmlprof's naming, a live scan's, a
    process of another container sharing the folder, whose pid is not seen here but whose lock is) stays."""
    removed = []
    try:
        candidates = sorted(temporary.glob(f"{JOURNAL_FOLDER_PREFIX}*"))[:_STALE_FOLDERS_PER_SCAN]
    except OSError:
        return removed
    for folder in candidates:
        if folder == keep or not _stale(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _stale(folder: Path) -> bool:
    from dmlprof.files import process_alive

    owner = folder.name[len(JOURNAL_FOLDER_PREFIX):].split("-", 1)[0]
    if not owner.isdigit() or process_alive(int(owner)) is not False:
        return False
    try:
        found = os.lstat(folder)
        import stat

        mine = getattr(os, "getuid", None)
        if not stat.S_ISDIR(found.st_mode) or (mine is not None and found.st_uid != mine()) \
                or time.time() - found.st_mtime < _STALE_AFTER_S:
            return False
        fd = os.open(folder / "crash.log", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:  # left empty (its files removed): its pid, age and owner are all there is to go by
        return True
    except OSError:
        return False
    try:
        return _lock(fd)  # nobody holds it: its supervisor is gone
    finally:
        os.close(fd)


#: where a journal is kept on Linux: a RAM-backed file system never writes its pages back to a disk, so a write into
#: the journal's mapping never waits on the writeback of its page (a busy 2-core machine, ext4: mean write 2.4 us
#: against 0.77 us, p99 12.7 against 6.0; a recorded step on an H100 host read the same in both, within its noise);
#: and how much room it must have left (a journal grows with the run)
_RAM_FOLDER = Path("/dev/shm")
_RAM_FOLDER_ROOM = 1 << 30


def _journal_folder() -> Path:
    """A new private folder for the journal and the crash log: in :data:`_RAM_FOLDER` where it has the room and
    the user set no ``TMPDIR`` (a folder chosen is theirs), else in the temporary folder."""
    if not os.environ.get("TMPDIR") and sys.platform.startswith("linux"):
        try:
            room = os.statvfs(_RAM_FOLDER)
            if room.f_bavail * room.f_frsize >= _RAM_FOLDER_ROOM:
                return Path(tempfile.mkdtemp(prefix=_journal_prefix(), dir=_RAM_FOLDER))
        except OSError:  # none there, or not ours to write: the temporary folder holds it
            pass
    return Path(tempfile.mkdtemp(prefix=_journal_prefix()))


def _journal_prefix() -> str:
    """``dmlprof-journal-pid<N>-``: the folder names its supervisor, whose death a later scan can tell."""
    return f"{JOURNAL_FOLDER_PREFIX}{os.getpid()}-"


def interpreter_options() -> list:
    """The options this Python was started with (``-W error``, ``-O``, ``-X dev``...), for the child that runs the
    script: without them its warning filters, asserts and dev mode are not the ones the user asked for.
    (``subprocess._args_from_interpreter_flags`` is what multiprocessing starts its children with.)"""
    flags = getattr(subprocess, "_args_from_interpreter_flags", None)
    options = list(flags()) if flags is not None else []
    # it passes on six -X options only: int_max_str_digits, warn_default_encoding, pycache_prefix... change what the
    # script computes or does too (int('9' * 5000) raises at the default limit); every -X python was given is in
    # sys._xoptions, so each one not passed already is passed as it came
    passed = {option.split("=", 1)[0] for before, option in zip(options, options[1:]) if before == "-X"}
    for name, value in getattr(sys, "_xoptions", {}).items():
        if name not in passed:
            options += ["-X", name if value is True else f"{name}={value}"]
    return options


def _hold(path: Path) -> Optional[int]:
    try:
        return os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
    except OSError:
        return None


def _put_back(folder: Path, held: dict) -> None:
    """The files the parent holds, written again where the scanned script removed them (never through a name
    planted in the meantime: the folder is made anew or is a real folder, each file made exclusively)."""
    try:
        if not os.path.lexists(folder):
            folder.mkdir(mode=0o700)
        elif not folder.is_dir() or folder.is_symlink():
            return
        for path, fd in held.items():
            if fd is None or os.path.lexists(path):
                continue
            with open(os.dup(fd), "rb") as kept, open(path, "xb") as copy:
                kept.seek(0)
                shutil.copyfileobj(kept, copy)
    except OSError:
        pass


def _start(command: list, env: dict):
    """The child, in a process group of its own on POSIX: a signal meant for the whole group (a closed terminal,
    a CI job's cancel) reaches the parent alone, which passes it on once. On a terminal the child's group
    takes the foreground, so Ctrl-C and a script's ``input()`` reach the child, as without dmlprof."""
    if os.name != "posix":
        return subprocess.Popen(command, env=env)  # Windows: Ctrl-C reaches every process of the console
    child = subprocess.Popen(command, env=env, preexec_fn=_in_own_group)
    fd = _terminal_fd()
    # a terminal whose foreground is dmlprof's group (not when dmlprof itself runs in the background)
    child.terminal = fd if fd is not None and os.getpgrp() == os.tcgetpgrp(fd) else None
    if child.terminal is not None:
        _give_terminal(child.terminal, child.pid)
    return child


def _in_own_group() -> None:  # runs in the child between fork and exec
    if os.name != "posix":  # a preexec_fn: POSIX only
        return
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):  # a child whose parent is killed outright (SIGKILL) ends too
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _terminal_fd() -> Optional[int]:
    try:
        return sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    except (OSError, ValueError):
        return None


def _give_terminal(fd: int, process_group: int) -> None:
    if os.name != "posix":  # a process group's terminal: POSIX only
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not change it otherwise
    try:
        os.tcsetpgrp(fd, process_group)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, previous)


class _passing_signals_to:
    """While the child runs, Ctrl-C, SIGTERM and SIGHUP sent to the parent are passed on to the child (which
    saves what it recorded and ends with their exit codes); afterwards the terminal is the parent's again."""

    def __init__(self, child):
        self.child = child
        self.saved: dict = {}

    def _forward(self, signum, frame):
        try:
            self.child.send_signal(signum)
        except OSError:
            pass

    def __enter__(self):
        from dmlprof import interrupts

        numbers = [getattr(signal, name) for name in _STOPPING_SIGNALS if hasattr(signal, name)]
        # Windows: the console's Ctrl-C reaches the child itself; nothing can be passed on. A signal this process
        # was started ignoring (nohup's SIGHUP) is left so, and the child inherits it ignored.
        self.saved = interrupts.handle(numbers, signal.SIG_IGN if os.name != "posix" else self._forward)
        return self

    def __exit__(self, *exc):
        from dmlprof import interrupts

        if getattr(self.child, "terminal", None) is not None:
            _give_terminal(self.child.terminal, os.getpgrp())  # windows: terminal is set on POSIX only (_start)
        interrupts.restore(self.saved)
        return False


def died_of(status: int) -> Optional[str]:
    """How a child with this exit status died (``"SIGSEGV"``, ``"an access violation"``), or ``None`` when
    it ended itself."""
    if status < 0:
        try:
            return signal.Signals(-status).name
        except ValueError:
            return f"signal {-status}"
    if os.name == "nt" and status >= 0xC0000000:
        return _WINDOWS_CRASHES.get(status, f"exception 0x{status:08X}")
    return None


def _exit_code(how: str, status: int) -> int:
    """A stopping signal keeps its documented code (130, 143, 129); an abrupt exit is a script's exit (0, else 3);
    a crash is 7."""
    if how == ABRUPT:
        return 0 if status == 0 else 3
    return _stopped_exit_code(how) or CRASHED_EXIT_CODE


def _stopped_exit_code(how: str) -> Optional[int]:
    """A signal that stops a run rather than crashing it keeps its documented code (130, 143, 129)."""
    return {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}.get(how)


def salvage(args, journal: Path, crash_log: Path, how: str, status: int) -> int:
    """Finish a dead child's scan from what it left: report, partial session, one error line."""
    from dmlprof.output import error_line
    from dmlprof.record.journal import read_journal

    contents = read_journal(journal)
    user_line = crash_location(crash_log)
    if contents.finished is not None:  # it had said its last word and saved what it had: its exit code stands
        if _stopped_exit_code(how) is not None:  # a signal that came after (docs/exit_codes.md)
            error_line(f"stopped by {how} after the scan ended")
            return _stopped_exit_code(how)
        if user_line:  # the script's own code (a thread of its own, its ctypes) crashed: plain python dies of it too
            error_line(f"the scanned process died of {how} at {user_line}, after its scan ended (the script's own "
                       "code, in a thread or an exit handler)", "the session is complete")
            return CRASHED_EXIT_CODE
        _note(f"the scanned process died of {how} on its way out, after its scan ended (a native library's exit "
              "handler); nothing was lost")
        return contents.finished
    # a script that took all its recorded steps before its process ended (os._exit at its end, from an exit
    # handler or a watchdog thread): its recording is whole, the run did not stop early (re-probe 13, 17-20)
    steps_done = how == ABRUPT and recorded_steps_done(contents)
    if contents.os_exit is not None:  # the scanned code's own os._exit: not a death
        message, code = os_exit_words(args, contents, user_line, status)
        ended = message
    elif steps_done:
        message = ended = crash_message(how, None, user_line) + ", after its recorded steps"
        code = _exit_code(how, status)
    else:
        running = contents.running[-1] if contents.running else contents.unrecorded
        message = crash_message(how, running, user_line, contents.calls[-1] if contents.calls else None)
        code, ended = _exit_code(how, status), f"the scanned process died of {how}"
    if how == ABRUPT and _contract_run(contents):  # a model file's run ended, by whatever thread: never a success
        code = 3
    # a call the device refused came first: on DirectML the process ended there, whatever came after (an exit
    # handler's os._exit(0), a catch-all's os._exit(1), a scheduler's SIGTERM); it leads, as where Python ends a run
    refusal = contents.refusal
    if refusal is not None:
        message, code = refusal_message(args, contents, message), REFUSED_EXIT_CODE
    if contents.header is None:
        if code == 0:  # a script that ended itself before it ran an op: nothing was lost
            _note(f"{message}, before the recording began; nothing was recorded")
        elif _journal_written(journal):
            error_line(f"{message}, before the recording began", "nothing was recorded")
        else:  # the child could not journal (a full or read-only temporary folder, or one the script removed)
            error_line(f"{message}; what it recorded is lost: its journal could not be kept in {journal.parent.parent} "
                       "(full, read-only or removed; TMPDIR picks another folder)", "nothing was saved")
        return code
    from dmlprof.errors import DmlprofError
    from dmlprof.output import print_report, write_outputs
    from dmlprof.report import build_report

    # a script that ended itself with os._exit(0) succeeded: its session is whole (as a sys.exit(0)'s is)
    ended_well = (contents.os_exit is not None and code == 0) or steps_done
    partial = refusal is not None or not ended_well
    session = session_from_journal(contents, message, ended, user_line, partial=partial, refusal=refusal)
    try:
        written = write_outputs(session, args)
        if not getattr(args, "quiet", False) and args.command == "scan":
            print_report(build_report(session), args)
    except DmlprofError as err:  # the report could not be shown: the session is on disk, and the error says so
        error_line(f"{message}; {err.one_line()}")
        return code
    if getattr(args, "gate", None) is not None and code == 0:  # dmlprof check: ended well, still held to its limits
        _note(message)
        return _gated(args, session, written)
    if getattr(args, "junit", None) and code != 0:  # dmlprof check: CI still gets its test case, in error
        from dmlprof.output import write_output
        from dmlprof.render.ci import junit_error_xml

        write_output(written, args.junit, lambda: junit_error_xml(args.model, message), "JUnit XML")
    if code == 0:
        _note(f"{message}; {written.note(partial=partial)}")
    else:
        error_line(message, written.note(partial=partial))
    return code


def _gated(args, session, written) -> int:
    """``dmlprof check``'s verdict on a salvaged session (its limits, annotations and --junit), as on a finished
    run's: a script's ``os._exit(0)`` must not pass a CI gate unchecked. (``args.gate``: the command's own, set by
    its parser: this layer imports no command.)"""
    from dmlprof.errors import DmlprofError
    from dmlprof.output import error_line
    from dmlprof.report import build_report

    try:
        return args.gate(args, lambda _: (session, build_report(session), written))
    except DmlprofError as err:
        error_line(err.one_line(), getattr(err, "kept", None))
        return err.exit_code


def os_exit_words(args, contents, user_line: str, status: int) -> "tuple[str, int]":
    """What a child that ended with the scanned code's own ``os._exit`` (journaled) is said to have done, and the
    scan's exit code (docs/exit_codes.md): a script's status 0 succeeded (0), any other failed (3); a model file's
    function has no business ending the process (3), from whatever thread."""
    code, at = contents.os_exit, f" at {user_line}" if user_line else ""
    name = Path(str(getattr(args, "model", "") or "the script")).name
    caller = f"a thread of {name}" if contents.os_exit_in_thread else name
    if _contract_run(contents):
        step = contents.calls[-1].step if contents.calls else 0
        if contents.os_exit_in_thread:  # (its step: whichever the main thread was in)
            return f"{caller} called os._exit({code}){at}, after {len(contents.step_times_ns)} measured step(s)", 3
        return f"{f'step {step}' if step else name} called os._exit({code}){at}", 3
    after = ", after its recorded steps" if recorded_steps_done(contents) else ""
    if status == 0:
        return f"{caller} ended its process with os._exit({code}){at}{after}", 0
    return f"{caller} exited with status {code} (os._exit){at}{after}", 3


def refusal_message(args, contents, ended: str) -> str:
    """The error line of a run whose call the device refused before its process ended otherwise (``ended``: how,
    in words): the refusal first, as a run that ends through Python says it (re-probe 14, cases 35-37)."""
    refusal = contents.refusal
    call = _refused_call(contents)
    where = Path(str(getattr(args, "model", "") or "the script")).name
    if _contract_run(contents):
        where = f"step {call.step}" if call is not None and call.step else where
    at = ", ".join(part for part in (refusal.get("op") or (call.op if call else ""), call.source if call else "")
                   if part)
    text = refusal.get("explanation") or f"the device refused the call ({refusal.get('message')})"
    remedy = f" ({refusal['remedy']})" if refusal.get("remedy") else ""
    return f"{where}: {text}; then {ended}, but on DirectML the process ends at this call (at {at}){remedy}"


def _refused_call(contents):
    """The journaled call the device refused, if it is among the calls kept (not a dropped warm-up's)."""
    number = contents.refusal.get("call") if contents.refusal else None
    return next((call for call in contents.calls if call.number == number), None) if number is not None else None


def _header_meta(contents) -> dict:
    """The journal header's run facts (its session's ``meta``), or nothing where it ended before the recording."""
    import json

    try:
        meta = json.loads(contents.header)["meta"]
    except (TypeError, ValueError, KeyError):  # no header: it ended before the recording began
        return {}
    return meta if isinstance(meta, dict) else {}


def _contract_run(contents) -> bool:
    return _header_meta(contents).get("run_mode") == "contract"


def recorded_steps_done(contents) -> bool:
    """Whether a script had taken every step of its recorded window (warm-up and recorded steps) before its process
    ended: its recording is whole, whatever ended the process after."""
    window = _header_meta(contents).get("script_window")
    if not isinstance(window, dict) or not contents.steps_taken:
        return False
    return contents.steps_taken >= (window.get("warmup_steps") or 0) + (window.get("steps_requested") or 0)


def _journal_written(journal: Path) -> bool:
    """Whether the child opened its journal (reserved ahead: never empty once opened)."""
    try:
        return journal.stat().st_size > 0
    except OSError:
        return False


def _note(text: str) -> None:
    try:
        print(f"dmlprof: note: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def crash_message(how: str, running, user_line: str, last=None) -> str:
    """``the scanned process died of SIGSEGV in aten::flip (float32 [4, 5]; at model.py:12, in net.body)``;
    ``last``: the last call that returned, named where the death came between calls from nowhere the user wrote
    (a native library's damage showing later: a lost DirectML device's heap)."""
    text = (f"the scanned process died of {how}" if how != ABRUPT else
            "the scanned process ended abruptly (abort(), or an exit nothing journaled: a native library's exit())")
    if running is not None:
        where = ", ".join(part for part in (f"at {user_line}" if user_line else "",
                                            f"in {running.module}" if running.module else "") if part)
        text += f" in {running.op}" + _in_brackets(_call_words(running), where)
    elif user_line:
        text += f" at {user_line}, between op calls (native code the script called)"
    elif last is not None:
        text += (f" between op calls, after its last recorded call {last.op}"
                 + _in_brackets(_call_words(last), f"in {last.module}" if last.module else ""))
    return text


def _in_brackets(*parts: str) -> str:
    """`` (float32 [4]; in fc)`` of the parts that say something: a call of no tensor inputs (``aten::empty_strided``)
    has no dtypes nor shapes, and read "(; in OptimizedModule)"."""
    said = "; ".join(part for part in parts if part)
    return f" ({said})" if said else ""


def _call_words(call) -> str:
    """``float32 [4, 5], [5]``: a journaled call's input dtypes and first shapes."""
    dtypes = ",".join(sorted({m[1] for m in call.inputs}))
    shapes = ", ".join(str(list(m[2])) for m in call.inputs[:3]) + (", ..." if len(call.inputs) > 3 else "")
    return " ".join(part for part in (dtypes, shapes) if part)


def crash_location(crash_log: Path) -> str:
    """The innermost line of the user's own code in the dead process's Python stack (faulthandler's dump):
    the first frame, innermost first, outside torch, dmlprof and the standard library."""
    try:
        text = crash_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    import re

    skip = ("site-packages", "dist-packages", f"{os.sep}dmlprof{os.sep}", "/dmlprof/", f"{os.sep}lib{os.sep}python")
    for match in re.finditer(r'File "([^"]+)", line (\d+)', text.split("\n\n")[-1] if "Current thread" not in text
                             else text[text.index("Current thread"):]):
        path, line = match.groups()
        if any(part in path for part in skip) or path.startswith("<"):
            continue
        return f"{shown_path(path)}:{line}"  # as the recorder names a call's line
    return ""


def session_from_journal(contents, message: str, ended: str, user_line: str, partial: bool = True, refusal=None):
    """The partial session of a journal: its header's facts, each call that returned, and the call the process
    died in (its last row, the failed call). ``ended``: how its process ended ("the scanned process died of
    SIGSEGV"); ``partial``: False for a script that ended itself well (``os._exit(0)``); ``refusal``: the journal's
    refused call (:attr:`~dmlprof.record.journal.JournalContents.refusal`), the session's finding."""
    import json

    from dmlprof.meta import DeviceFailure
    from dmlprof.record.frame import rows_to_frame
    from dmlprof.session import Session

    header = Session.from_dict(json.loads(contents.header))
    evidence: list = []
    rows = []
    calls = list(contents.calls)
    refused_call = _refused_call(contents) if refusal is not None else None
    refused_row = calls.index(refused_call) if refused_call is not None else None
    if refused_row is not None and not refusal.get("went_on"):  # refused before it ran: nothing after it ran
        del calls[refused_row + 1:]
    for call in calls:
        first = len(evidence)
        evidence.extend(call.fallen)
        rows.append(_row(call, first, len(evidence)))
    running = contents.running[-1] if contents.running and refusal is None else None
    if running is not None:
        rows.append(_row(running, len(evidence), len(evidence), source=user_line))
    backend = _JournaledBackend((header.meta.device.device or "cpu").split(":")[0])
    ops = rows_to_frame(rows, evidence, backend, refused=frozenset(() if refused_row is None else (refused_row,)))
    times = tuple(round(ns / 1e6, 3) for ns in contents.step_times_ns)  # a model file's measured steps
    held = f"the calls written down before it and the times of its {len(times)} measured step(s)" if times else \
        "the calls written down before it"
    changes = dict(partial=partial, partial_reason=message if partial else None,
                   notes=tuple(header.meta.notes) + (
                       f"{ended}: this session holds {held} (not torch.profiler's events nor its cross-check of "
                       "the times: they are read only when a run ends)",))
    if times:
        changes.update(step_times_ms=times, steps=len(times))
    window = header.meta.script_window
    if window is not None and contents.steps_taken:  # a script's steps, counted as it took them
        window = window.after_steps(contents.steps_taken)
        changes.update(script_window=window, steps=window.steps_recorded())
    if running is not None:
        changes.update(failed_op=running.op, failed_source=user_line or None, failed_module=running.module or None)
        on_device = any(m[0] == backend.device_type for m in running.inputs)
        died = ended.replace("the scanned process", "the process", 1)
        if on_device and backend.is_accelerator():
            changes["device_failure"] = DeviceFailure(
                op=running.op, kind="aborts", message=died,
                dtypes=",".join(sorted({m[1] for m in running.inputs})), source=user_line,
                explanation=f"{died} in this call on the device (a native crash in the backend)",
                remedy="move this call to the CPU (or change its arguments), then scan again", observed=True,
                ended_process=True)
    if refusal is not None:
        changes.update(_refusal_finding(refusal, refused_call, len(calls) - refused_row - 1
                                        if refused_row is not None and refusal.get("went_on") else None))
    return Session(meta=header.meta.updated(**changes), ops=ops)


def _refusal_finding(refusal: dict, call, calls_after: Optional[int]) -> dict:
    """The session facts of the journal's refused call (``call``: its journaled call, where it was kept), as a
    run that ends at it through Python has them (dmlprof.runner.assembly)."""
    from dmlprof.meta import DeviceFailure

    op = refusal.get("op") or (call.op if call is not None else "a call")
    source = call.source if call is not None else ""
    module = call.module if call is not None else ""
    return dict(failed_op=op, failed_source=source or None, failed_module=module or None, device_failure=DeviceFailure(
        op=op, kind=refusal.get("kind") or "aborts", message=refusal.get("message") or "",
        dtypes=",".join(sorted({m[1] for m in call.inputs})) if call is not None else "", source=source,
        explanation=refusal.get("explanation") or "", remedy=refusal.get("remedy") or "",
        observed=not refusal.get("predicted"), calls_after=calls_after))


def _row(call, warn_lo: int, warn_hi: int, source: Optional[str] = None) -> tuple:
    """A journaled call as the recorder's raw row (record.frame.rows_to_frame reads it)."""
    return (call.step, call.phase, call.op, call.inputs, call.outputs, call.start_ns, call.elapsed_ns,
            warn_lo, warn_hi, call.module, source if source is not None else call.source, call.thread, call.arguments)


class _JournaledBackend:
    """What judging a journaled call needs of its backend: the device's type and how a fallback is named
    (the child named each fallback already, so evidence items are op names)."""

    fallback_evidence = "fallback warning"

    def __init__(self, device_type: str):
        self.device_type = device_type
        self._accelerator = device_type != "cpu"

    def is_accelerator(self) -> bool:
        return self._accelerator

    @staticmethod
    def fallback_ops_in(item):
        return item
