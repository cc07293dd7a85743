"""What the user's code may do to the process while dmlprof runs it, undone or made safe.

The scanned code runs in dmlprof's own process: it may end it (``sys.exit``,
``os._exit``), register exit handlers, change folder, replace or close the standard streams, and a
script expects ``sys.argv`` and ``sys.path[0]`` to be its own. Each context here
lets it, and leaves dmlprof's process as it was for the report that follows.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import traceback
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Mapping
from typing import Optional

from dmlprof.interrupts import REAL_OS_EXIT


class HardExit(BaseException):
    """The scanned code asked to replace dmlprof's process (:class:`ProcessReplaced`), raised in its place."""

    def __init__(self, code: int):
        super().__init__(f"os._exit({code})")
        self.code = code


class ProcessReplaced(HardExit):
    """``os.execv``/``os.execve`` (and the ``os.exec*`` calls made of them) called by the scanned code: the
    program would replace dmlprof's process with one nothing records (a script that restarts itself), and the
    supervisor would find a process that ended without a word ("ended abruptly"). During a scan it raises this
    instead, and the scan ends as if the code had returned there, saying so."""

    def __init__(self, call: str, environ: Optional[dict] = None):
        super().__init__(0)
        self.call = call
        #: the environment the new process would have had (``execve``'s, else the process's own at the call)
        self.environ = environ if environ is not None else dict(os.environ)


def exit_status(code) -> int:
    """The exit status ``sys.exit(code)`` gives a process under plain python: ``None`` 0, a number (``True`` too: an
    int) that number as the system keeps it (POSIX: its low 8 bits, so 256 is 0 and -1 is 255; Windows: 32
    bits), anything else (a message, which Python prints) 1."""
    if code is None:
        return 0
    if not isinstance(code, int):
        return 1
    return code & 0xFF if os.name == "posix" else code & 0xFFFFFFFF


def exit_call(exc: BaseException) -> str:
    """``sys.exit(2)`` / ``os.execv(...)``: how the user's code asked to end the process."""
    if isinstance(exc, ProcessReplaced):
        return exc.call
    return f"sys.exit({exc.code!r})" if exc.code is not None else "sys.exit()"


@contextmanager
def hard_exit_trapped(backend=None):
    """``os._exit`` in the scanned process ends it there, as it does under plain python: an exception raised in its
    place ran the script's ``finally`` blocks and ``with`` exits, and a catch-all (or a ``__del__``, whose errors
    Python ignores) let the script run on past its own end. What it recorded is not lost: the scan's supervised
    child journals the call, its line and whether a thread other than the main one called it (a model file's
    watchdog: exit 3 as from the main thread, re-probe 13 case 22), and the supervisor finishes the scan from the
    journal (:func:`dmlprof.survival.os_exit_journaled`); a scan run unsupervised says that it ends. ``os.exec*`` in
    the main thread raises :class:`ProcessReplaced` instead (forked children and other threads exec for real, and
    forked children exit for real). ``backend``: the scanned device, whose note of the aborts it raised where
    nothing recorded them (another thread, a forked worker, past the recorded steps) is read before the process
    ends: on DirectML it had ended at that call (re-probe 15, cases 11-16)."""
    real_exit, pid = os._exit, os.getpid()  # (os._exit as it is now: a test may stand in for it)
    run_thread = threading.get_native_id()  # the run's: an abort noted on another thread is said to be there
    # os.execl/execlp/execvp... call these two by their module names: trapping them traps every os.exec*
    real_execs = {name: getattr(os, name) for name in ("execv", "execve") if hasattr(os, name)}

    def ours() -> bool:  # a forked child or another thread execs for real
        return os.getpid() == pid and threading.current_thread() is threading.main_thread()

    def trapped(code):
        if os.getpid() == pid and isinstance(code, int):  # (anything else: os._exit's own TypeError)
            from dmlprof import survival

            in_thread = threading.current_thread() is not threading.main_thread()
            if backend is not None:
                _notice_unrecorded_aborts(backend, run_thread)
            if not survival.os_exit_journaled(code, in_thread):
                code = _say_the_scan_ends(code, backend)
        real_exit(code)

    def exec_trapped(name):
        def replace_process(path, *args):
            if not ours():
                return real_execs[name](path, *args)
            given = args[1] if name == "execve" and len(args) > 1 else None
            raise ProcessReplaced(f"os.{name}({os.fspath(path)!r}, ...)",
                                  dict(given) if isinstance(given, Mapping) else None)
        return replace_process

    os._exit = trapped
    for name in real_execs:
        setattr(os, name, exec_trapped(name))
    try:
        yield
    finally:
        os._exit = real_exit
        for name, real in real_execs.items():
            setattr(os, name, real)


def _notice_unrecorded_aborts(backend, run_thread: int) -> None:
    """The device's aborts nothing recorded, kept as the run's refusal and journaled before the process ends
    (:meth:`~dmlprof.backends.base.Backend.notice_unrecorded_aborts`); never an error of dmlprof's in the
    script's ``os._exit``."""
    try:
        backend.notice_unrecorded_aborts(run_thread=run_thread)
    except Exception:  # its note could not be read: the exit goes on, as the script asked
        pass


def _say_the_scan_ends(code: int, backend=None) -> int:
    """One line where nothing will finish the scan after the script's ``os._exit`` (no supervisor): the process
    ends as the script asked, and the report and session with it; the status it ends with. After a call the device
    refused, which ends the process on DirectML, the status is the refusal's (4), not the script's (re-probe 14:
    an exit handler's ``os._exit(0)`` read as a success). ``backend``: the scan's, else the recorder's."""
    if backend is None:
        from dmlprof.record.recorder import Recorder

        backend = getattr(Recorder.current or Recorder.last, "backend", None)
    refusal = getattr(backend, "first_refusal", None)
    unsaved = ("this scan ran unsupervised (DMLPROF_NO_SUPERVISOR, a job's rank, the Python API), so nothing it "
               "recorded is saved")
    if refusal is not None:
        error = getattr(refusal, "error", refusal)
        line = (f"dmlprof: error: the scanned code called os._exit({code}) after a call the device refused "
                f"({str(error).splitlines()[0] if str(error) else type(error).__name__}), which ends the process on "
                f"DirectML: exit 4; {unsaved}\n")
        code = 4
    else:
        line = f"dmlprof: note: the scanned code called os._exit({code}): the process ends there, as under plain " \
               f"python; {unsaved}\n"
    try:
        os.write(2, line.encode("utf-8", "replace"))
    except OSError:
        pass
    return code


@contextmanager
def cwd_kept():
    """The user's code may ``os.chdir`` or ``os.umask``; dmlprof's outputs stay relative to where it was started,
    and the folders it makes for them get its own umask (a script's ``os.umask(0o277)`` made ``--out`` a folder
    its owner could not write the session into)."""
    mask = os.umask(0o022)
    os.umask(mask)
    try:
        start = os.getcwd()
    except OSError:  # started in a folder that no longer exists: nothing to come back to
        start = None
    try:
        yield
    finally:
        os.umask(mask)
        if start is not None:
            try:
                os.chdir(start)
            except OSError:
                pass


@contextmanager
def streams_kept():
    """The user's code may replace ``sys.stdout``/``sys.stderr`` (a script that logs to a file) or close
    them; dmlprof's report goes to the streams it was started with, reopened if they were closed."""
    saved = sys.stdout, sys.stderr
    try:
        yield
    finally:
        sys.stdout, sys.stderr = (open_again(stream, fd) for stream, fd in zip(saved, (1, 2)))


def open_again(stream, fd: int):
    """``stream`` or, when the user's code closed it, a new text stream on its descriptor."""
    if stream is not None and not getattr(stream, "closed", False):
        return stream
    try:
        return open(fd, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)
    except (OSError, ValueError):
        return open(os.devnull, "w", encoding="utf-8")



@contextmanager
def script_context(path: Path, script_args: list, module: Optional[str] = None):
    """Run a script as ``python path args...`` (or ``python -m module args...``) would: argv and sys.path[0]."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(path.resolve() if module else path)] + script_args
    if not getattr(sys.flags, "safe_path", False):  # python -P (3.11+) puts neither folder first
        sys.path.insert(0, os.getcwd() if module else str(path.resolve().parent))
    try:
        yield
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def is_dmlprof_code(frame) -> bool:
    """Whether ``frame`` runs dmlprof's own code (not the scanned code, nor torch's on its behalf)."""
    return frame.f_globals.get("__name__", "").partition(".")[0] == "dmlprof"


@contextmanager
def exit_handlers_run_at_its_end():
    """A script's exit handlers (``atexit.register``, its own and those of libraries it imports) run when it ends,
    as Python runs them when the script's program ends: after its last line (or its ``sys.exit``, or the error it
    ended with), last registered first, each once, an exception printed as Python prints it and the next one run.
    In dmlprof's process they would run only after dmlprof had read the run and reported: an abort the device
    raised there was missed. Handlers dmlprof's own code registers are the process's, and wait for its end.
    """
    handlers: list = []
    real_register, real_unregister = atexit.register, atexit.unregister

    def register(func, *args, **kwargs):
        if is_dmlprof_code(sys._getframe(1)):
            return real_register(func, *args, **kwargs)
        handlers.append((func, args, kwargs))
        return func

    def unregister(func):
        handlers[:] = [handler for handler in handlers if handler[0] != func]
        real_unregister(func)

    atexit.register, atexit.unregister = register, unregister
    threads_before = set(threading.enumerate())
    ended_by: Optional[BaseException] = None
    try:
        yield
    except BaseException as exc:
        ended_by = exc
        raise
    finally:
        atexit.register, atexit.unregister = real_register, real_unregister
        if cut_short is None and ended_by is None and handlers:  # its last line or sys.exit(0)
            _join_its_threads(threads_before)
        while handlers:
            func, args, kwargs = handlers.pop()
            try:
                func(*args, **kwargs)
            except BaseException as error:
                if not isinstance(error, (Exception, SystemExit, KeyboardInterrupt)) or _a_stop(error):
                    raise  # dmlprof's own (SIGTERM, SIGHUP: plain python dies of them; the step window, a refusal)
                # Python ignores the rest, a KeyboardInterrupt too (the handler's own raise, or Ctrl-C then): it is
                # printed and the next handler runs (taken for Ctrl-C, it ended a finished run "interrupted", 130)
                print(f"Exception ignored in atexit callback: {func!r}", file=sys.stderr)
                # as Python prints it: from the handler's own frame, without the script's end (a sys.exit(5) became
                # dmlprof's error) as "During handling of the above exception"
                error.__suppress_context__ = True
                traceback.print_exception(type(error), error, error.__traceback__.tb_next)


def _a_stop(error: BaseException) -> bool:
    """SIGTERM or SIGHUP, raised as a KeyboardInterrupt by one of dmlprof's handlers (a single scan's, a rank's)."""
    from dmlprof.interrupts import SignalStop

    return isinstance(error, SignalStop)


def its_excepthook(error: BaseException) -> None:
    """The error the script ended with, given to the ``sys.excepthook`` it set (a crash logger, a notifier), as
    Python gives it at the end of a program: from the script's own frames, before the exit handlers. Python's own
    hook (which prints the traceback) is not called: dmlprof's error line says the error."""
    hook = sys.excepthook
    if hook is sys.__excepthook__ or getattr(hook, "__module__", "").startswith("torch."):
        # torch's own (torch.distributed's prefixes each line of Python's traceback with the rank) prints the
        # traceback that dmlprof's error line stands in for: a printer, not the script's handler
        return
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename.startswith(ours):  # dmlprof's runner
        frames = frames.tb_next
    try:
        hook(type(error), error, frames)  # its os._exit (a crash logger's way to end hung threads) ends the process
    except Exception as failure:  # as Python says it
        print("Error in sys.excepthook:", file=sys.stderr)
        traceback.print_exception(type(failure), failure, failure.__traceback__)
        print("\nOriginal exception was:", file=sys.stderr)
        traceback.print_exception(type(error), error, frames)


def _join_its_threads(threads_before: set) -> None:
    """Wait for the non-daemon threads the script started, as Python's shutdown does before it runs the exit
    handlers (a handler that writes what a worker thread gathers saw it half done). Only for a script that ended well by
    itself (its last line, ``sys.exit(0)``): one stopped, interrupted, refused or failed is not held by them (its
    thread may wait for what the failure skipped: plain python hangs there, after dmlprof's report here).
    ThreadPoolExecutor workers wait on their queue until shutdown tells them: they are left to the process's end."""
    executors = getattr(sys.modules.get("concurrent.futures.thread"), "_threads_queues", {})
    for thread in threading.enumerate():
        if (thread not in threads_before and not thread.daemon and thread is not threading.current_thread()
                and thread not in executors):
            thread.join()


def run_as_main(path: Path) -> None:
    """Run a script file as ``python path`` runs it: ``__main__.__file__`` and the code's file name absolute (as
    Python gives them since 3.9), ``sys.argv[0]`` as typed (script_context set it). ``runpy.run_path`` keeps the
    name it is given in both, or makes argv[0] absolute too: a relative ``__file__`` makes a script's
    ``os.path.dirname(__file__)`` '' (``os.listdir('')`` fails) and wrong once the script changes folder."""
    import runpy
    import types

    absolute = os.path.abspath(path)
    if not absolute.endswith(".py"):  # a folder or zip with __main__.py, a .pyc: runpy's paths for them
        runpy.run_path(absolute, init_globals=_main_builtins(), run_name="__main__")
        return
    with open(absolute, "rb") as source:  # bytes: compile reads the file's own coding declaration
        # dont_inherit: this module's `from __future__ import annotations` must not reach the script
        code = compile(source.read(), absolute, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    from importlib.machinery import SourceFileLoader

    # the loader python gives __main__ (its get_source, get_data); runpy gives none
    main.__dict__.update(__file__=absolute, __cached__=None, __loader__=SourceFileLoader("__main__", absolute),
                         __package__=None, __spec__=None, **_main_builtins())
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main  # what pickle and multiprocessing look classes up in, as runpy does
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def run_module_as_main(module: str) -> None:
    """Run a module as ``python -m module`` runs it (``script_context`` set argv and sys.path)."""
    import runpy

    runpy.run_module(module, init_globals=_main_builtins(), run_name="__main__", alter_sys=True)


def _main_builtins() -> dict:
    """``__builtins__`` as ``__main__`` has it: the module. ``exec`` and runpy put the module's dict there, as in an
    imported module, and a script's ``__builtins__.profile = ...`` (line_profiler's fallback) raised AttributeError."""
    import builtins

    return {"__builtins__": builtins}


#: how the scanned script's run was cut short in this process, if it was: "stopped" (dmlprof ended it after the
#: recorded steps, or at os.execv, or a signal or the device's refusal did); None otherwise
cut_short: Optional[str] = None


def exit_process(code: int) -> None:
    """End dmlprof's process as the scanned script's own end would have ended it.

    Python's shutdown waits for every non-daemon thread, then runs the atexit handlers. A script dmlprof stopped
    after the recorded steps never reached the code that ends its threads (a heartbeat's ``stop.set();
    thread.join()``): waiting for them hung the scan forever after its report. The process then ends without
    waiting for them, after the atexit handlers (the script's end would have run them) and after flushing what the
    script wrote to files it never closed (shutdown would have). (A script's own ``os._exit`` ends the process
    where it is called: :func:`hard_exit_trapped`.)
    """
    if cut_short is None or not any(thread.is_alive() and not thread.daemon for thread in threading.enumerate()
                                    if thread is not threading.main_thread()):
        sys.exit(code)  # the ordinary shutdown: nothing of the script's can keep it waiting
    # what shutdown runs before it waits for threads (3.9+): a ThreadPoolExecutor's, which lets its workers
    # finish what was submitted (a checkpoint being saved) and joins them
    for callback in reversed(list(getattr(threading, "_threading_atexits", ()))):
        try:
            callback()
        except Exception:  # shutdown would print it and go on
            pass
    atexit._run_exitfuncs()
    _flush_open_files()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    REAL_OS_EXIT(code)


def _flush_open_files() -> None:
    """What the script wrote to files it left open reaches them, as their finalizers would write it at shutdown."""
    import _io
    import gc

    for item in gc.get_objects():
        # by the type's own bases: isinstance would ask lazy modules' proxies for __class__ (torch warns then)
        if not issubclass(type(item), _io._IOBase):
            continue
        try:
            if not item.closed and item.writable():
                item.flush()
        except Exception:  # a file of the script's in any state (its disk full, a broken pipe): shutdown ignores it too
            pass
