"""Writing dmlprof's files safely: whole or not at all, never through someone else's name.

Every file dmlprof writes (sessions, reports, traces) goes through here:

- :func:`write_atomic` replaces a file in one step: the text goes to a temp
  file with a unique, unguessable name created exclusively in the same folder,
  then ``os.replace`` puts it in place. A full disk or a crash leaves the old
  file as it was and no temp file behind; a symlink planted at a guessable
  temp name cannot redirect the write.
- :func:`write_new` publishes under a name nobody holds yet (``name.ext``,
  then ``name-2.ext``, ...), so scans started in the same second never
  overwrite each other's sessions.
- :func:`make_new_dir` creates a run folder nobody holds yet (``name``, then ``name-2``, ...), and
  :func:`own_dir` checks a folder a whole job shares is this user's own.
- :func:`fit_name` keeps generated names within what file systems allow.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Iterator, Optional

#: generated file-name parts stay below this many UTF-8 bytes (NAME_MAX is 255 on most file systems)
NAME_PART_BYTES = 96
#: how many ``-N`` suffixes write_new tries before giving up
MAX_SUFFIX = 10_000


def _mode_for_new_files() -> int:
    # mkstemp creates 0600; a report should get the permissions any new file gets (umask).
    if os.name == "nt":
        return 0o666
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_NEW_FILE_MODE = _mode_for_new_files()


def _temp_beside(path: Path, data: bytes) -> Path:
    """``data`` in a new temp file next to ``path`` (unique name, created exclusively); removed on failure."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=str(path.parent))
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.chmod(tmp, _NEW_FILE_MODE)
        except OSError:
            pass  # permissions are a courtesy; the content is what matters
    except BaseException:
        _remove(tmp)
        raise
    return tmp


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _is_special(path: Path) -> bool:
    """An existing target that is not a regular file (``/dev/stdout``, ``/dev/null``, a FIFO)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def write_atomic(path, text: str) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) in one step; the old file survives any failure.

    A target that exists and is not a regular file (a device, a FIFO) is
    written in place: there is nothing to replace atomically, and replacing
    ``/dev/stdout`` with a file would be wrong. Raises ``OSError``.
    """
    path = Path(path)
    data = text.encode("utf-8")
    if _is_special(path):
        with open(path, "wb") as handle:
            handle.write(data)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_beside(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    return path


def numbered(path: Path, suffix: str = "") -> Iterator[Path]:
    """``path``, then ``stem-2<suffix>``, ``stem-3<suffix>``, ... (``suffix`` is the part kept last)."""
    name = path.name
    stem = name[: -len(suffix)] if suffix and name.endswith(suffix) else path.stem
    ending = suffix if suffix and name.endswith(suffix) else path.suffix
    yield path
    for n in range(2, MAX_SUFFIX):
        yield path.with_name(f"{stem}-{n}{ending}")


def write_new(path, text: str, suffix: str = "") -> Path:
    """Write ``text`` under ``path`` or, when that name is taken, the first free ``stem-N<suffix>``.

    Never overwrites anything, including a file another process creates at
    the same moment: the finished temp file is hard-linked to the new name,
    which fails if the name exists. Returns the path written. Raises ``OSError``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_beside(path, text.encode("utf-8"))
    try:
        return _publish(tmp, numbered(path, suffix))
    finally:
        _remove(tmp)


def _publish(tmp: Path, candidates: Iterator[Path]) -> Path:
    for candidate in candidates:
        try:
            os.link(tmp, candidate)
            return candidate
        except FileExistsError:
            continue
        except (OSError, AttributeError, NotImplementedError) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise
            # no hard links here (FAT, some network shares): claim the name exclusively, then fill it
            try:
                os.close(os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                continue
            os.replace(tmp, candidate)
            return candidate
    raise FileExistsError(errno.EEXIST, "every numbered name is taken", str(tmp.parent))


def make_new_dir(path) -> Path:
    """Create the folder ``path``, or the first free ``path-N``; returns it (never reuses one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for candidate in numbered(path, suffix=""):
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "every numbered name is taken", str(path))


def own_dir(path) -> Path:
    """The folder ``path``, created if missing, refused (``PermissionError``) when it is a symlink or another user's.

    For a folder several processes of one job must share (the ranks of a bare ``torchrun`` job), which
    :func:`make_new_dir` cannot give them: whoever created it first must be this user, or files written
    there could be read, replaced or redirected by someone else.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise PermissionError(errno.EPERM, "not a folder of its own (a symlink or a file)", str(path))
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise PermissionError(errno.EPERM, "the folder belongs to another user", str(path))
    return path


_NOT_IN_NAMES = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')


def name_part(text: str, max_bytes: int = NAME_PART_BYTES) -> str:
    """``text`` made fit to be part of a file name on any system: no separators or control
    characters (Windows' reserved ones included), at most ``max_bytes`` UTF-8 bytes."""
    return fit_name(_NOT_IN_NAMES.sub("_", str(text)).strip(" .") or "_", max_bytes)


def fit_name(part: str, max_bytes: int = NAME_PART_BYTES) -> str:
    """``part`` shortened to ``max_bytes`` UTF-8 bytes, with a hash of the whole so shortened names stay distinct."""
    encoded = part.encode("utf-8")
    if len(encoded) <= max_bytes:
        return part
    digest = hashlib.sha1(encoded).hexdigest()[:8]
    head = encoded[: max_bytes - len(digest) - 1].decode("utf-8", "ignore")
    return f"{head}-{digest}"


def same_file(a, b) -> bool:
    """Whether two paths name one existing file (symlinks and ``..`` resolved)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


__all__ = ["fit_name", "make_new_dir", "name_part", "numbered", "own_dir", "same_file", "write_atomic", "write_new"]



def process_alive(pid: int) -> Optional[bool]:
    """Whether process ``pid`` of this machine still runs; None where that cannot be told."""
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill(pid, 0) would end the process there: ask Windows itself
        return _windows_process_alive(pid)
    else:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # PermissionError: it runs, as another user
            return None
        return True


def _windows_process_alive(pid: int) -> Optional[bool]:
    import ctypes

    kernel32 = getattr(getattr(ctypes, "windll", None), "kernel32", None)
    if kernel32 is None:
        return None
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return None if ctypes.GetLastError() == 5 else False  # ERROR_ACCESS_DENIED: it exists
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return None
        return code.value == 259  # STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


_shown_cache: dict = {}


def shown_path(filename: str) -> str:
    """A source file as dmlprof prints it: relative under the working directory, whole elsewhere (not
    ``../../tmp/x.py``), with forward slashes."""
    short = _shown_cache.get(filename)
    if short is None:
        try:
            short = os.path.relpath(filename)
            if short.startswith(".."):
                short = filename
        except ValueError:  # another drive on Windows
            short = filename
        short = short.replace(os.sep, "/")
        _shown_cache[filename] = short
    return short
