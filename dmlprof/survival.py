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

from dmlprof.record.journal import JOURNAL_ENV
from dmlprof.salvage import ABRUPT, CRASHED_EXIT_CODE, REFUSED_EXIT_CODE, _note, salvage  # noqa: F401 (theirs)

#: the commands whose scan runs in a supervised child
COMMANDS = ("scan", "check")
#: set in the child: it is the scan, not its supervisor
CHILD_ENV = "DMLPROF_SUPERVISED"
#: set by a user (or a test) to run a scan in one process, as before: a native crash then loses it
NO_SUPERVISOR_ENV = "DMLPROF_NO_SUPERVISOR"
#: where the child's faulthandler writes Python's stack when it dies
CRASH_LOG_ENV = "DMLPROF_CRASH_LOG"

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
#: os.register_at_fork has this process's forked children leave the crash log alone (it cannot be unregistered)
_fork_hook_registered = False
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
    _forked_children_write_no_crash_log()


def _forked_children_write_no_crash_log() -> None:
    """A child the script forks (``os.fork``, a fork-started worker) inherits faulthandler and the crash log's
    descriptor, and its own death wrote its stack there: the salvage then named the child's line for the scanned
    process's death (re-probe 22, case 22). The log is the scanned process's alone. (No fork on Windows.)"""
    global _fork_hook_registered
    if not hasattr(os, "register_at_fork") or _fork_hook_registered:
        return
    os.register_at_fork(after_in_child=_crash_log_not_inherited)
    _fork_hook_registered = True


def _crash_log_not_inherited() -> None:
    global _crash_log_fd
    if _crash_log_fd is None:
        return
    _close_crash_log()  # faulthandler off in the child, and its copy of the descriptor closed
    _crash_log_fd = None


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
