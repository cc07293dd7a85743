"""dmlprof holds on Windows: no POSIX-only call, module or constant without a guard (a static check).

Nothing runs dmlprof on Windows in CI, so this reads the code instead: every use of a name that Windows'
Python lacks (``os.fork``, ``signal.SIGKILL``, ``fcntl``, ...) must sit under a guard that keeps Windows away
from it: an ``if`` on ``os.name``/``sys.platform``/``hasattr``/``POSIX``, a ``try`` that catches the
``ImportError``/``AttributeError`` Windows raises, or a ``# windows:`` comment on the line saying why
Windows never gets there. ``os.kill(pid, 0)``, which asks whether a process runs on POSIX, ends it on
Windows: it needs the same guard (``dmlprof.files.process_alive`` is the portable way).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dmlprof"

#: modules Windows' Python does not have
POSIX_MODULES = frozenset({"fcntl", "resource", "pwd", "grp", "termios", "tty", "pty", "posix", "syslog", "crypt"})
#: attributes Windows' os and signal modules do not have (checked against CPython 3.11's docs)
POSIX_ATTRIBUTES = {
    "os": frozenset({"fork", "forkpty", "killpg", "getpgid", "setpgid", "setsid", "getsid", "getuid", "geteuid",
                     "getgid", "getegid", "setuid", "setgid", "getgroups", "wait3", "wait4", "WNOHANG", "uname",
                     "sched_getaffinity", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK", "mkfifo", "pipe2",
                     "register_at_fork", "getloadavg", "sysconf", "pathconf", "statvfs", "nice", "chown",
                     "lchown", "fchown", "setpgrp", "getpgrp", "WIFSIGNALED", "WTERMSIG", "WEXITSTATUS",
                     "tcsetpgrp", "tcgetpgrp", "ttyname", "openpty", "sync"}),
    "signal": frozenset({"SIGKILL", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGPIPE", "SIGQUIT",
                         "SIGSTOP", "SIGCONT", "SIGTSTP", "SIGTTOU", "SIGTTIN", "SIGWINCH", "alarm", "setitimer", "getitimer", "pause",
                         "pthread_kill", "pthread_sigmask", "sigwait", "siginterrupt"}),
}
_GUARD_WORDS = ("os.name", "sys.platform", "hasattr", "POSIX", "platform.system", "WINDOWS", "IS_WINDOWS")
_CAUGHT = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "Exception", "BaseException"})


def _segment_reader(source: str):
    """``ast.get_source_segment`` for one file, its lines split once (the stdlib's splits the whole source at every
    call: over this package, a minute of the check's CPU)."""
    lines = [line.encode("utf-8") for line in source.splitlines(keepends=True)]

    def segment(node) -> str:
        if getattr(node, "end_lineno", None) is None:
            return ""
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return lines[first][node.col_offset:node.end_col_offset].decode("utf-8")
        return b"".join([lines[first][node.col_offset:], *lines[first + 1:last],
                         lines[last][:node.end_col_offset]]).decode("utf-8")

    return segment


def _guarded_by_if(node: ast.If, segment) -> bool:
    return any(word in segment(node.test) for word in _GUARD_WORDS)


def _catches(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _CAUGHT for n in names)


def _unguarded_uses(path: Path, source: str = "") -> list:
    source = source or path.read_text(encoding="utf-8")
    lines = source.splitlines()
    segment = _segment_reader(source)
    found = []

    def visit(node, guarded: bool):
        if isinstance(node, ast.If) and _guarded_by_if(node, segment):
            guarded = True
        if isinstance(node, ast.IfExp) and any(w in segment(node.test) for w in _GUARD_WORDS):
            guarded = True
        if isinstance(node, ast.Try) and any(_catches(h) for h in node.handlers):
            for child in node.body:
                visit(child, True)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, guarded)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            guarded = True  # getattr(signal, "SIGHUP", None): a fallback is the guard
        what = None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            what = next((n for n in names if n.split(".")[0] in POSIX_MODULES), None)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.attr in POSIX_ATTRIBUTES.get(node.value.id, ()):
            what = f"{node.value.id}.{node.attr}"
        elif isinstance(node, ast.Call) and segment(node.func) == "os.kill" and \
                len(node.args) == 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == 0:
            what = "os.kill(pid, 0) (on Windows it ends the process instead of asking whether it runs)"
        if what and not guarded and "# windows:" not in lines[node.lineno - 1]:
            found.append(f"{path.as_posix()}:{node.lineno}: {what}")
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and value and all(isinstance(v, ast.stmt) for v in value):
                visit_block(value, guarded)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        visit(item, guarded)
            elif isinstance(value, ast.AST):
                visit(value, guarded)

    def visit_block(statements, guarded: bool):
        for statement in statements:
            visit(statement, guarded)
            # "if os.name != 'posix': return ...": what follows in the block runs on POSIX only
            if isinstance(statement, ast.If) and not statement.orelse and _guarded_by_if(statement, segment) and \
                    isinstance(statement.body[-1], (ast.Return, ast.Raise)):
                guarded = True

    visit(ast.parse(source), False)
    return found


def test_no_posix_only_name_is_used_without_a_guard():
    found = [use for path in sorted(PACKAGE.rglob("*.py")) for use in _unguarded_uses(path.relative_to(PACKAGE.parent),
                                                                                   path.read_text(encoding="utf-8"))]
    assert not found, "POSIX-only names without a guard (Windows' Python lacks them):\n" + "\n".join(found)


@pytest.mark.parametrize("code, flagged", [
    ("import os\nos.fork()\n", True),
    ("import signal\nsignal.signal(signal.SIGHUP, print)\n", True),
    ("import resource\n", True),
    ("import os\nif os.name != 'nt':\n    os.killpg(1, 9)\n", False),
    ("import signal\nx = getattr(signal, 'SIGKILL', None)\n", False),
    ("try:\n    import fcntl\nexcept ImportError:\n    fcntl = None\n", False),
    ("import signal\nif hasattr(signal, 'SIGUSR1'):\n    signal.signal(signal.SIGUSR1, print)\n", False),
    ("import os\nos.getuid()  # windows: only reached from the POSIX launcher\n", False),
    ("import os\nos.kill(123, 0)\n", True),
    ("import os\ndef f():\n    if os.name != 'posix':\n        return None\n    return os.getpgrp()\n", False),
    ("import os\ndef f():\n    if os.name != 'posix':\n        x = 1\n    return os.getpgrp()\n", True),
    ("import os\nif os.name != 'nt':\n    os.kill(123, 0)\n", False),
])
def test_the_check_tells_guarded_from_unguarded_uses(code, flagged):
    assert bool(_unguarded_uses(Path("probe.py"), code)) == flagged
