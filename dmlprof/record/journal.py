"""The journal: every recorded call written down as it happens, so a process that dies keeps its recording.

A native crash (a SIGSEGV in a backend's kernel, a glog ``abort()`` in torch-directml, the user's own
ctypes) ends the process on the spot: nothing in it runs again, and the rows a recorder holds in memory
die with it. So a scan runs the user's code in a child process (:mod:`dmlprof.survival`) whose recorder
writes each call to this journal twice: before it runs (op, step, phase, module, input dtypes and
shapes: a call that never returns is still named) and after (outputs, time, the fallbacks it raised,
the user's line). The records go into a shared memory mapping of the journal file: the pages belong to
the operating system's file cache, so a line is kept the moment it is copied in, whatever kills the
writer after, at the cost of a memory copy (two ``os.write`` calls a call cost a recorded LeNet-5 step
8 %; benchmarks/journal_cost.py). The file is reserved ahead in chunks (a full disk is an error at the
reservation, never a fault at a write); the part not yet written reads as NUL bytes, which end the
reading like a cut-off line; a journal whose writer finished is cut to what it wrote. The parent reads
the journal back (:func:`read_journal`) and builds the partial session from it.

The format is private to one scan (a temporary file, read once by the process that made it): tab-separated
lines, every string interned once as JSON (``S``), so a call's records are numbers and short shape text.
Nothing here imports torch: the parent reads the journal without it.
"""
from __future__ import annotations

import errno
import json
import mmap
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Optional

#: the environment variable that tells a scan's child process where to journal
JOURNAL_ENV = "DMLPROF_JOURNAL"
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
#: the first reservation of the file (about 30,000 calls), and the largest step it grows by
_FIRST_CHUNK = 4 << 20
_LARGEST_CHUNK = 64 << 20
#: the first reservation where the folder cannot hold :data:`_FIRST_CHUNK` (about 500 calls; it grows as it can)
_SMALL_FIRST_CHUNK = 64 << 10
#: how many distinct record tails a journal keeps made
_TAILS_MAX = 50_000
#: bytes every reservation keeps free for the last word (``F``), so a journal that could not grow still says it
_LAST_WORD_ROOM = 32
#: a file system that cannot allocate ahead (the file is then extended sparse)
_NO_FALLOCATE = (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOSYS", errno.EINVAL))


_meta_texts: dict = {}


def _meta_text(meta) -> str:
    """``cpu:float32:32x3x224x224:602112;...``: devices, dtypes, shapes and bytes of a call's tensors (a step's
    calls repeat the same few: each text is made once)."""
    try:
        text = _meta_texts.get(meta)
    except TypeError:  # not the recorder's tuples (a list): formatted each time
        return _format_meta(meta)
    if text is None:
        text = _format_meta(meta)
        if len(_meta_texts) < 100_000:  # bounded: a script of ever-new shapes formats each anew
            _meta_texts[meta] = text
    return text


def _format_meta(meta) -> str:
    return ";".join(f"{m[0]}:{_dtype_name(m[1])}:{'x'.join(map(str, m[2]))}:{m[3]}" for m in meta)


_dtype_names: dict = {}


def _dtype_name(dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).replace("torch.", "")
    return name


_process_journal: "Optional[Journal]" = None


def process_journal() -> "Optional[Journal]":
    """This process's journal (one per scan's child, opened at its first recording), or ``None``."""
    global _process_journal
    if _process_journal is None:
        _process_journal = Journal.from_environment()
    return _process_journal


def journal_finished(exit_code: int) -> None:
    """The scan's child ends on its own terms (its session saved, or its error said): nothing to salvage."""
    if _process_journal is not None:
        _process_journal.finished(exit_code)


class Journal:
    """Writes a recording's calls to ``path`` as they happen (each record copied into the file's mapping).

    :meth:`begin` before a call runs, :meth:`end` once it returned (or raised); calls on several
    threads (autograd's) may interleave, so each names its begin number.
    """

    def __init__(self, path):
        self.path = str(path)
        self._map: Optional[mmap.mmap] = None
        #: bytes written, and bytes the file holds (reserved) now
        self.written = self._size = 0
        self._strings: dict = {}
        #: the fixed part of begin and end records, by what fixes it (:meth:`_tail`)
        self._begin_tails: dict = {}
        self._end_tails: dict = {}
        self._calls = 0
        self._lock = threading.Lock()  # autograd's threads record too: records and ids stay whole
        # No descriptor is kept open: the scanned code may close every descriptor it inherited (os.closerange) and
        # open its own files on the freed numbers, and a journal growing or cutting "its" descriptor then extended
        # the user's file with NUL bytes. The file is opened by its path each time, and must still be this one.
        fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        try:
            found = os.fstat(fd)
            self._identity = (found.st_dev, found.st_ino)
            try:
                self._reserve(_FIRST_CHUNK, fd)
            except OSError as exc:  # a nearly full temporary folder still holds a smaller journal
                if exc.errno != errno.ENOSPC:
                    raise
                self._reserve(_SMALL_FIRST_CHUNK, fd)
        finally:
            os.close(fd)
        self._open = True
        _open_journals.add(self)

    def _reopen(self) -> int:
        """The journal's file, opened again by its path; an error where it is gone or another file took its place."""
        fd = os.open(self.path, os.O_RDWR | getattr(os, "O_BINARY", 0))  # never made again: deleted is gone
        found = os.fstat(fd)
        if (found.st_dev, found.st_ino) != self._identity:
            os.close(fd)
            raise OSError(errno.ESTALE, "another file took the journal's place", self.path)
        return fd

    def _reserve(self, size: int, fd: Optional[int] = None) -> None:
        """Let the file hold ``size`` bytes, mapped. Blocks are allocated now where the system can: a sparse
        file on a full disk would end the writer with SIGBUS at a write, not an error here."""
        if fd is None:
            # the view first: its descriptor's number, closed by the scanned code, may be the one reopening takes
            self._stop_writing()
            fd = self._reopen()
            try:
                return self._reserve(size, fd)
            finally:
                os.close(fd)
        self._stop_writing()  # Windows cannot resize a file while a view of it is open
        try:
            os.posix_fallocate(fd, self._size, size - self._size)
        except (AttributeError, OSError) as exc:  # not POSIX (Windows allocates what it extends), or not here
            if isinstance(exc, OSError) and exc.errno not in _NO_FALLOCATE:
                raise
            os.ftruncate(fd, size)
        self._map = mmap.mmap(fd, size)
        self._size = size

    @classmethod
    def from_environment(cls) -> "Optional[Journal]":
        """The journal a scan's parent asked for (:data:`JOURNAL_ENV`), or ``None``."""
        path = os.environ.get(JOURNAL_ENV)
        if not path:
            return None
        os.environ.pop(JOURNAL_ENV, None)  # the scanned script's own children must not write to it
        try:
            return cls(path)
        except OSError:
            return None  # the scan goes on without a journal: a crash then keeps nothing, as before

    def _write(self, text: str) -> None:
        """Copy one record in (the caller holds the lock)."""
        if self._map is None:  # closed, or a forked child's copy
            return
        data = text.encode("utf-8", "replace")
        end = self.written + len(data)
        if end > self._size - _LAST_WORD_ROOM:
            try:
                self._reserve(max(end + _LAST_WORD_ROOM, self._size + min(self._size, _LARGEST_CHUNK)))
            except (OSError, ValueError):
                self._stop_writing()  # a full disk must not stop the user's program: the journal only
                return                # guards against its death
        self._map[self.written:end] = data
        self.written = end

    def _id(self, text) -> int:
        """The interned number of a string (written once, before its first use)."""
        number = self._strings.get(text)
        if number is None:
            number = self._strings[text] = len(self._strings)
            self._write(f"S\t{number}\t{json.dumps('' if text is None else str(text))}\n")
        return number

    # -- what the child writes ----------------------------------------------------
    def header(self, session_json: str) -> None:
        """The run's facts as a session file of no calls (what the partial session starts from)."""
        with self._lock:
            self._write(f"H\t{json.dumps(session_json)}\n")

    def begin(self, op: str, step: int, phase: str, module: str, inputs) -> int:
        """A call about to run; returns its number for :meth:`end`."""
        with self._lock:
            number = self._calls
            self._calls += 1
            tail = self._tail(self._begin_tails, (op, phase, module, inputs), self._begin_tail)
            self._write(f"B\t{number}\t{step}\t{tail}")
        return number

    def end(self, number: int, outputs, start_ns: int, elapsed_ns: int, thread: int, source: str,
            fallen: tuple = (), arguments: str = "") -> None:
        """The call ``number`` returned (or raised): its outputs, its time, what fell back inside it, the
        arguments a wrong-result class is keyed by (JSON text, dmlprof.directml.call_arguments)."""
        with self._lock:
            tail = self._tail(self._end_tails, (source, outputs, fallen, arguments), self._end_tail)
            self._write(f"E\t{number}\t{start_ns}\t{elapsed_ns}\t{thread}\t{tail}")

    def _begin_tail(self, op, phase, module, inputs) -> str:  # not the step: each step's calls are the last one's
        return f"{self._id(op)}\t{self._id(phase)}\t{self._id(module)}\t{_meta_text(inputs)}\n"

    def _end_tail(self, source, outputs, fallen, arguments) -> str:
        fallen_ids = ",".join(str(self._id(name)) for name in fallen)
        return f"{self._id(source)}\t{_meta_text(outputs)}\t{fallen_ids}\t{self._id(arguments or '')}\n"

    @staticmethod
    def _tail(cache: dict, key: tuple, make) -> str:
        """The part of a record that ``key`` fixes, made once: a step's calls repeat the same few (the strings it
        interns are journaled when it is first made, before the record that uses them)."""
        try:
            text = cache.get(key)
        except TypeError:  # unhashable facts (a list): made each time
            return make(*key)
        if text is None:
            text = make(*key)
            if len(cache) < _TAILS_MAX:  # bounded: a script of ever-new shapes makes each anew
                cache[key] = text
        return text

    def unrecorded(self, op: str, inputs) -> None:
        """A call outside the recording about to run (a warm-up step under the device's refusals): not a row,
        but the call to name if the process dies in it."""
        with self._lock:
            self._write(f"U\t{self._id(op)}\t{_meta_text(inputs)}\n")

    def unrecorded_returned(self) -> None:
        with self._lock:
            self._write("u\n")

    def rows_dropped(self) -> None:
        """A script's warm-up ended: the rows so far are not the recording's."""
        with self._lock:
            self._write("D\n")

    def finished(self, exit_code: int) -> None:
        """The child said its last word (its report, or its error line): nothing is left to salvage."""
        with self._lock:
            if self._map is None and self._open:  # writing stopped where the file could not grow (a full disk)
                self._last_word_past_a_stop(f"F\t{int(exit_code)}\n".encode())
            else:
                self._write(f"F\t{int(exit_code)}\n")
        self.close()

    def _last_word_past_a_stop(self, data: bytes) -> None:
        """Write the last word into the room every reservation keeps for it (:data:`_LAST_WORD_ROOM`, allocated
        already): a child that finished is not salvaged as dead because its journal had filled the disk."""
        if self.written + len(data) > self._size:
            return
        try:
            fd = self._reopen()
        except OSError:
            return
        try:
            os.lseek(fd, self.written, os.SEEK_SET)
            if os.write(fd, data) == len(data):
                self.written += len(data)
        except OSError:
            pass
        finally:
            os.close(fd)  # the file ends with this record: the parent reads its tail alone (:func:`last_word`)

    def close(self) -> None:
        """Stop writing; the file is cut to what was written."""
        with self._lock:
            if not self._open:
                return
            self._open = False
            self._stop_writing()
            try:
                fd = self._reopen()
            except OSError:
                return  # deleted, or replaced: the NUL bytes after the records end the reading all the same
            try:
                os.ftruncate(fd, self.written)
            except OSError:
                pass
            finally:
                os.close(fd)

    def _stop_writing(self) -> None:
        if self._map is not None:
            _close_view(self._map, self._size)
            self._map = None

    def forget_in_forked_child(self) -> None:
        """A forked child shares the parent's mapping: it must not write into the parent's journal."""
        self._map = None  # the child's view goes with the child; the parent's stays whole
        self._open = False  # the file is the parent's to cut


#: mappings whose descriptor the scanned code closed (kept, never closed: see _close_view)
_views_kept: list = []


def _close_view(view: mmap.mmap, size: int) -> None:
    """Unmap ``view``, unless the descriptor CPython's mmap keeps (a duplicate of the file's) is no longer the
    journal's: the scanned code closed it (os.closerange), and its number may be a file of the user's now, which
    closing the view would close. Such a view stays mapped to the end of the process."""
    try:
        ours = view.size() == size  # fstat of the view's own descriptor
    except (OSError, ValueError):
        ours = False
    if ours:
        view.close()
    else:
        _views_kept.append(view)


_open_journals: "weakref.WeakSet[Journal]" = weakref.WeakSet()


def _forget_journals_in_forked_child() -> None:
    global _process_journal
    for journal in list(_open_journals):
        journal.forget_in_forked_child()
    _process_journal = None


if hasattr(os, "register_at_fork"):  # POSIX; there is no fork elsewhere
    os.register_at_fork(after_in_child=_forget_journals_in_forked_child)


# -- what the parent reads ------------------------------------------------------------
@dataclass
class JournaledCall:
    """One call as the journal holds it (``outputs``/``time`` are empty for a call that never returned)."""

    number: int
    op: str
    step: int
    phase: str
    module: str
    inputs: tuple
    outputs: tuple = ()
    start_ns: int = 0
    elapsed_ns: int = 0
    thread: int = 0
    source: str = ""
    fallen: tuple = ()
    arguments: str = ""
    returned: bool = False


@dataclass
class JournalContents:
    """What a dead child left: its facts, its calls in the order they returned, and the calls still running."""

    header: Optional[str] = None
    calls: list = field(default_factory=list)
    running: list = field(default_factory=list)
    #: the unrecorded call that was running (a warm-up step's), if the process died in one
    unrecorded: Optional[JournaledCall] = None
    #: the exit code the child chose, once it had said its last word (it may die after that: a native library's
    #: exit handlers)
    finished: Optional[int] = None


def last_word(path) -> "tuple[bool, Optional[int]]":
    """``(anything journaled, the exit code the child ended with)`` from the journal's ends alone (a finished
    journal is cut after its ``F`` record; one whose writer died ends in NUL bytes): a long journal is not read
    whole to learn that nothing is lost."""
    try:
        with open(path, "rb") as journal:
            journaled = journal.read(1) not in (b"", b"\0")
            journal.seek(0, os.SEEK_END)
            journal.seek(max(0, journal.tell() - 64))
            tail = journal.read().decode("utf-8", "replace")
    except OSError:
        return False, None
    last = tail.rstrip("\n").rsplit("\n", 1)[-1]
    if last.startswith("F\t"):
        try:
            return True, int(last[2:])
        except ValueError:
            pass
    return journaled, None


def _parse_meta(text: str) -> tuple:
    found = []
    for part in text.split(";") if text else ():
        device, dtype, shape, size = part.rsplit(":", 3)
        found.append((device, dtype, tuple(int(d) for d in shape.split("x") if d), int(size)))
    return tuple(found)


def read_journal(path) -> JournalContents:
    """Read a journal back; a damaged or cut-off line (the writer died mid-write) ends the reading there."""
    contents = JournalContents()
    strings: dict = {}
    begun: dict = {}
    try:
        with open(path, encoding="utf-8", errors="replace", newline="\n") as lines:
            for line in lines:
                if not line.endswith("\n"):
                    break
                try:
                    _read_line(line[:-1].split("\t"), strings, begun, contents)
                except (ValueError, KeyError, IndexError):
                    break
    except OSError:
        return contents
    contents.running = sorted(begun.values(), key=lambda call: call.number)
    return contents


def _read_line(fields: list, strings: dict, begun: dict, contents: JournalContents) -> None:
    kind = fields[0]
    if kind == "S":
        strings[int(fields[1])] = json.loads(fields[2])
    elif kind == "B":
        number = int(fields[1])
        begun[number] = JournaledCall(number=number, step=int(fields[2]), op=strings[int(fields[3])],
                                      phase=strings[int(fields[4])], module=strings[int(fields[5])],
                                      inputs=_parse_meta(fields[6]))
    elif kind == "E":
        call = begun.pop(int(fields[1]))
        call.start_ns, call.elapsed_ns, call.thread = int(fields[2]), int(fields[3]), int(fields[4])
        call.source = strings[int(fields[5])]
        call.outputs = _parse_meta(fields[6])
        call.fallen = tuple(strings[int(i)] for i in fields[7].split(",") if i)
        call.arguments = strings[int(fields[8])]
        call.returned = True
        contents.calls.append(call)
    elif kind == "U":
        contents.unrecorded = JournaledCall(number=-1, op=strings[int(fields[1])], step=0, phase="", module="",
                                            inputs=_parse_meta(fields[2]))
    elif kind == "u":
        contents.unrecorded = None
    elif kind == "D":
        contents.calls.clear()
    elif kind == "H":  # a recording begins (--replace records twice): its calls are the ones that count
        contents.header = json.loads(fields[1])
        contents.calls.clear()
    elif kind == "F":
        contents.finished = int(fields[1])
