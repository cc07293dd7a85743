"""The journal: every recorded call written down as it happens, so a process that dies keeps its recording.

A native crash (a SIGSEGV in a backend's kernel, a glog ``abort()`` in torch-directml, the user's own
ctypes) ends the process on the spot: nothing in it runs again, and the rows a recorder holds in memory
die with it. So a scan runs the user's code in a child process (:mod:`dmlprof.survival`) whose recorder
writes each call to this journal twice: before it runs (op, step, phase, module, input dtypes and
shapes: a call that never returns is still named) and after (outputs, time, the fallbacks it raised,
the user's line). The records go into a shared memory mapping of the journal file: the pages belong to
the operating system's file cache, so a record is kept the moment it is copied in, whatever kills the
writer after. The file is reserved ahead in chunks (a full disk is an error at the reservation, never a
fault at a write); the part not yet written reads as NUL bytes; a journal whose writer finished is cut to
what it wrote. The parent reads the journal back (:func:`read_journal`) and builds the partial session from it.

What a record costs is what a recorded step pays twice a call (benchmarks/journal_cost.py): text lines made,
encoded and copied under a lock cost a recorded LeNet-5 step 9 % on the CPU, 4x what the two writes cost timed
alone (between two kernels the formatting's code and data are out of the caches). So a call's record is one
fixed 32-byte slot, packed straight into the mapping by one ``struct`` call: its kind, the number of the
call's fixed part (op, phase, module, input facts; or the user's line, output facts, fallbacks, arguments,
thread), and its numbers (step; or the begin's offset, start and time). Each fixed part is written once, as
JSON text in string slots, before the first record that names it (a step's calls repeat the same few). A slot's
offset is taken by ``next()`` on a counter, atomic under the GIL: no lock on a call's path, and the records of
calls on several threads (autograd's) never overlap; the view ends a slot short of the file, so a record past it
fails to pack and only then is the file grown (no room check on a call's path either). A slot taken but not yet
written when the process died reads as NUL bytes and is passed over.

The format is private to one scan (a temporary file, read once by the process that made it). Nothing here
imports torch: the parent reads the journal without it.
"""
from __future__ import annotations

import errno
import itertools
import json
import mmap
import os
import struct
import threading
import weakref
from dataclasses import dataclass, field
from typing import Optional

from dmlprof.tables.wrong_classes import written_view_backpropagated

#: the environment variable that tells a scan's child process where to journal
JOURNAL_ENV = "DMLPROF_JOURNAL"
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
#: the first reservation of the file (about 65,000 calls), and the largest step it grows by
_FIRST_CHUNK = 4 << 20
_LARGEST_CHUNK = 64 << 20
#: the first reservation where the folder cannot hold :data:`_FIRST_CHUNK` (about 1,000 calls; it grows as it can)
_SMALL_FIRST_CHUNK = 64 << 10
#: how many distinct fixed parts of records a journal keeps numbered
_TAILS_MAX = 50_000
#: every record's size: a slot's offset is its number times this
_SLOT = 32
#: bytes every reservation keeps free past the view: a slot for the stop (``W``: writing stopped here, the folder
#: full) and a slot for the last word (``F``, or ``X``), so a journal that could not grow still says both (a
#: salvage must not take the last call written for the call the process died in)
_LAST_WORD_ROOM = 2 * _SLOT
#: a file system that cannot allocate ahead (the file is then extended sparse)
_NO_FALLOCATE = (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOSYS", errno.EINVAL))

# The slots, each a prefix of the reader's layout (_SLOT_LAYOUT): kind, two small numbers, a string's number, then
# three 64-bit numbers (or a string slot's bytes).
_BEGIN = struct.Struct("<c3xIq")  # B, the fixed part's number, the step
_END = struct.Struct("<c3xIqqq")  # E, the fixed part's number, the begin's slot, start, elapsed
_STRING = struct.Struct("<cBBxI24s")  # S, bytes used, last piece (1), the string's number, up to 24 bytes of it
_NAMED = struct.Struct("<c3xI")  # U (an unrecorded call: its fixed part), H (the header's string), P (a target's)
_REFUSAL = struct.Struct("<c3xIq")  # R, its words' string, the refused call's begin slot (-1: a call nothing recorded)
_WORD = struct.Struct("<c3xIq")  # F and X with an exit code (X: 1 from a thread not the main one), T with a step
# count, M with a measured step's time (ns), G with a written call's begin slot, W with the slot number where writing
# stopped for want of room; D and u alone
_SLOT_LAYOUT = struct.Struct("<cBBxIqqq")
_STRING_PIECE = 24
assert _SLOT_LAYOUT.size == _SLOT == _END.size == _STRING.size


def _meta_json(meta) -> list:
    """``[["cpu", "float32", [32, 3, 224, 224], 602112], ...]``: device, dtype, shape and bytes of each tensor."""
    return [[str(m[0]), _dtype_name(m[1]), [int(d) for d in m[2]], int(m[3])] for m in meta]


_dtype_names: dict = {}


def _dtype_name(dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).replace("torch.", "")
    return name


def _op_text(op) -> str:
    """The dispatcher's spelling of an overload (``aten::lerp.Scalar_out``): the recorder hands the overload itself,
    named only the first time (dmlprof.record.frame.op_name, without importing torch)."""
    if isinstance(op, str):
        return op
    schema = op._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


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
    """Writes a recording's calls to ``path`` as they happen (each record packed into the file's mapping).

    :meth:`begin` before a call runs, :meth:`end` once it returned (or raised); calls on several
    threads (autograd's) may interleave, so each end names its begin's number.
    """

    def __init__(self, path):
        self.path = str(path)
        self._map: Optional[mmap.mmap] = None
        #: bytes the file holds (reserved) now; the view maps all but the room kept for the stop and the last word
        #: (:data:`_LAST_WORD_ROOM`), so a record past the view fails to pack, and only then is the file grown: no
        #: check on a call's path
        self._size = 0
        #: where writing stopped (a growth failed: a full disk), else None
        self._stopped_at: Optional[int] = None
        #: the next slot's offset: ``next()`` takes one, atomically, on whichever thread records
        self._offsets = itertools.count(0, _SLOT)
        self._strings = 0
        #: the number of each fixed part written, by what fixes it (:meth:`begin`, :meth:`end`); the objects keyed
        #: by their ``id`` are kept alive here, so no other object can take their id while they are keys
        self._begin_tails: dict = {}
        self._end_tails: dict = {}
        self._kept: list = []
        self._lock = threading.RLock()  # strings, growth and closing: a call's own records take no lock
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

    @property
    def written(self) -> int:
        """Bytes written: every slot taken so far (or up to where writing stopped)."""
        taken = _taken(self._offsets)
        return taken if self._stopped_at is None else min(taken, self._stopped_at)

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
        self._map = mmap.mmap(fd, size - _LAST_WORD_ROOM)
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

    # -- a call's two records: the hot path (no lock, one packing each; see the module's docstring) -------------
    def begin(self, op, step: int, phase: str, module: str, inputs) -> int:
        """A call about to run (``op``: its overload, or its name); returns its number for :meth:`end`."""
        try:
            tail = self._begin_tails[hash((id(op), phase, module, inputs))]
        except (KeyError, TypeError):  # its first call (or unhashable facts, a list: numbered each time)
            tail = self._begin_tail(op, phase, module, inputs)
        offset = next(self._offsets)
        try:
            _BEGIN.pack_into(self._map, offset, b"B", tail, step)
        except (TypeError, ValueError, struct.error):  # past the view (or none, or replaced): see _write_late
            self._write_late(_BEGIN, offset, b"B", tail, step)
        return offset

    def end(self, number: int, outputs, start_ns: int, elapsed_ns: int, thread: int, source: str,
            fallen: tuple = (), arguments: str = "") -> None:
        """The call ``number`` returned (or raised): its outputs, its time, what fell back inside it, the
        arguments a wrong-result class is keyed by (JSON text, dmlprof.directml.call_arguments)."""
        try:
            tail = self._end_tails[hash((source, outputs, fallen, arguments, thread))]
        except (KeyError, TypeError):
            tail = self._end_tail(source, outputs, fallen, arguments, thread)
        offset = next(self._offsets)
        try:
            _END.pack_into(self._map, offset, b"E", tail, number, start_ns, elapsed_ns)
        except (TypeError, ValueError, struct.error):
            self._write_late(_END, offset, b"E", tail, number, start_ns, elapsed_ns)

    def _write_late(self, layout: struct.Struct, offset: int, *values) -> None:
        """A record that did not pack where it was taken: past the view (the file is grown first, and a full disk
        stops the writing there, the last word's room kept), or the view was replaced by another thread's growth
        between this one reading it and packing into it; no view (stopped, closed, a forked child's): not kept."""
        with self._lock:
            if self._map is None:
                return
            if offset + _SLOT > self._size - _LAST_WORD_ROOM:
                try:
                    self._reserve(max(offset + _SLOT + _LAST_WORD_ROOM,
                                      self._size + min(self._size, _LARGEST_CHUNK)))
                except (OSError, ValueError):
                    self._stop_writing()  # a full disk must not stop the user's program: the journal only
                    self._stopped_at = self._size - _LAST_WORD_ROOM  # guards against its death
                    self._in_the_room(_word(b"W", 0, self._stopped_at // _SLOT))  # and says where it stopped
                    return
            try:
                layout.pack_into(self._map, offset, *values)
            except (TypeError, ValueError, struct.error):  # a value out of range: that record is not kept
                pass

    # -- what a record names: its fixed part, written once ---------------------------------------------------------
    def _begin_tail(self, op, phase, module, inputs) -> int:
        text = json.dumps([_op_text(op), _text(phase), _text(module), _meta_json(inputs)])
        return self._number(self._begin_tails, (id(op), phase, module, inputs), text, op)

    def _end_tail(self, source, outputs, fallen, arguments, thread) -> int:
        text = json.dumps([_text(source), _meta_json(outputs), [str(name) for name in fallen], _text(arguments),
                           int(thread)])
        return self._number(self._end_tails, (source, outputs, fallen, arguments, thread), text)

    def _number(self, cache: dict, facts: tuple, text: str, keep=None) -> int:
        """The number of a fixed part, its text written before the record that names it; kept by the hash of its
        ``facts`` while the cache has room (bounded: a script of ever-new shapes numbers each anew).

        Keyed by the hash, not the facts: a lookup by the facts compares them, element by element, with the key
        stored at the first call, whose objects are out of the caches by the next step (on a GPU host a call's
        journal cost 4-5 us in a step against 0.8 us timed alone); an int compares at once. Two fixed parts of one
        journal with the same 64-bit hash (never seen; about 1 in 10^10 for 50,000 of them) would name each
        other's facts in a crash's partial session, nothing else."""
        with self._lock:
            try:
                key = hash(facts)
            except TypeError:  # unhashable facts
                key = None
            found = cache.get(key) if key is not None else None
            if found is not None:  # another thread numbered it meanwhile
                return found
            number = self._string(text)
            if key is not None and len(cache) < _TAILS_MAX:
                cache[key] = number
                if keep is not None:
                    self._kept.append(keep)  # its id is in the key
            return number

    def _string(self, text: str) -> int:
        """Write ``text`` in string slots, before any record names it; its number."""
        with self._lock:
            number = self._strings
            self._strings += 1
            data = text.encode("utf-8", "replace")
            starts = range(0, len(data), _STRING_PIECE) if data else range(1)
            for start in starts:
                piece = data[start:start + _STRING_PIECE]
                self._put(_STRING, b"S", len(piece), start == starts[-1], number, piece)
            return number

    def _put(self, layout: struct.Struct, *values) -> None:
        """A record off a call's path, in the next slot."""
        offset = next(self._offsets)
        try:
            layout.pack_into(self._map, offset, *values)
        except (TypeError, ValueError, struct.error):
            self._write_late(layout, offset, *values)

    # -- what the child writes besides its calls -----------------------------------------------------------------
    def header(self, session_json: str) -> None:
        """The run's facts as a session file of no calls (what the partial session starts from)."""
        with self._lock:
            self._put(_NAMED, b"H", self._string(session_json))

    def target_begins(self, words: str) -> None:
        """A side-by-side run (``--target dml,xpu,mps``) begins predicting one target: ``words``, JSON of the target,
        every target, the finished targets' lines and the sessions saved (dmlprof.cli.side_by_side), what a
        salvage says per target where the process dies in this one. The calls and facts journaled before were
        another target's."""
        with self._lock:
            self._put(_NAMED, b"P", self._string(words))

    def unrecorded(self, op, inputs) -> None:
        """A call outside the recording about to run (a warm-up step under the device's refusals): not a row,
        but the call to name if the process dies in it."""
        try:
            tail = self._begin_tails[hash((id(op), "", "", inputs))]
        except (KeyError, TypeError):
            tail = self._begin_tail(op, "", "", inputs)
        self._put(_NAMED, b"U", tail)

    def unrecorded_returned(self) -> None:
        self._put(_WORD, b"u", 0, 0)

    def step_taken(self, taken: int) -> None:
        """The script took its ``taken``-th optimizer step (warm-up and unrecorded steps counted): a salvaged
        session says how many steps ran and which of them were recorded."""
        self._put(_WORD, b"T", 0, int(taken))

    def step_time(self, elapsed_ns: int) -> None:
        """A measured step of a model file took ``elapsed_ns`` (what its session's step times are): a salvaged
        session keeps them."""
        self._put(_WORD, b"M", 0, int(elapsed_ns))

    def rows_dropped(self) -> None:
        """A script's warm-up ended: the rows so far are not the recording's."""
        self._put(_WORD, b"D", 0, 0)

    def backpropagated(self, call: int) -> None:
        """A backward ran through the CopySlices node of the write ``call`` (its :meth:`begin`'s number) into a
        view past its base's start: the written-view class holds for it (dmlprof.record.written_views)."""
        self._put(_WORD, b"G", 0, int(call))

    def refusal(self, call: Optional[int], words: str) -> None:
        """The device refused a call (one that ends torch-directml's process, refused or raised in its place):
        ``call``, its :meth:`begin`'s number (``None`` where nothing recorded it), and ``words``, the finding's
        facts as JSON (dmlprof.backends.base.refusal_words). A process ended after it by ``os._exit`` (an exit
        handler's, a launch script's catch-all) is salvaged with the refusal as its finding, as a run that ends
        through Python is (re-probe 14, cases 35-37)."""
        with self._lock:
            self._put(_REFUSAL, b"R", self._string(words), -1 if call is None else int(call))

    def os_exit(self, code: int, in_thread: bool = False) -> None:
        """The scanned code called ``os._exit(code)`` (``in_thread``: in a thread other than the main one): the
        process ends at once, as under plain python, and the parent finishes the scan from the journal, naming the
        call (not a death, not abrupt)."""
        self._last_word(b"X", int(in_thread), int(code))

    def finished(self, exit_code: int) -> None:
        """The child said its last word (its report, or its error line): nothing is left to salvage."""
        self._last_word(b"F", 0, int(exit_code))
        self.close()

    def _last_word(self, kind: bytes, small: int, code: int) -> None:
        """``F`` or ``X``: in the next slot, or, where writing stopped (a full disk), in the room kept for it: a child
        that finished (or called os._exit) is not salvaged as dead because its journal had filled the disk."""
        with self._lock:
            if self._map is None and self._open:
                self._in_the_room(_word(kind, small, code))
            else:
                self._put(_WORD, kind, small, code)

    def _in_the_room(self, data: bytes) -> None:
        """Write ``data`` (one slot) past where writing stopped, into the room every reservation keeps
        (:data:`_LAST_WORD_ROOM`, allocated already): the stop's ``W``, then the last word."""
        written = self.written
        if written + len(data) > self._size:
            return
        try:
            fd = self._reopen()
        except OSError:
            return
        try:
            os.lseek(fd, written, os.SEEK_SET)
            if os.write(fd, data) == len(data):
                self._stopped_at = written + len(data)
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
        self._lock = threading.RLock()  # another thread may have held it at the fork
        self._open = False  # the file is the parent's to cut


def _word(kind: bytes, small: int, number: int) -> bytes:
    """A word slot's bytes, written by :meth:`Journal._in_the_room` (no mapping left to pack into)."""
    return _WORD.pack(kind, small, number).ljust(_SLOT, b"\0")


def _text(value) -> str:
    return "" if value is None else str(value)


def _taken(counter) -> int:
    """The next number ``counter`` (an ``itertools.count(0, step)``) gives, without taking it: its repr is
    ``count(N, step)``."""
    return int(repr(counter)[6:].split(",")[0].rstrip(")"))


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


@dataclass(frozen=True)
class JournalStop:
    """Where a journal stopped for want of room: after ``calls`` calls of the recording (those begun), in the
    recorded step ``step`` (the last call's), with ``steps_taken`` optimizer steps journaled (None: none)."""

    calls: int
    step: int
    steps_taken: Optional[int]


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
    #: the code of the ``os._exit`` the scanned code ended its process with (:meth:`Journal.os_exit`), if it did
    os_exit: Optional[int] = None
    #: whether that ``os._exit`` was called in a thread other than the main one
    os_exit_in_thread: bool = False
    #: the optimizer steps the script had taken (:meth:`Journal.step_taken`), if it took any
    steps_taken: Optional[int] = None
    #: the measured steps' times, in ns (:meth:`Journal.step_time`; a model file's)
    step_times_ns: list = field(default_factory=list)
    #: where writing stopped for want of room (the journal's folder full, :class:`JournalStop`): what ran after it
    #: is not journaled, so the last call journaled is not where the process ended
    stopped: "Optional[JournalStop]" = None
    #: the first call the device refused (:meth:`Journal.refusal`): its words, and ``call``, the refused call's
    #: number (a :class:`JournaledCall`'s), or None where nothing recorded it
    refusal: Optional[dict] = None
    #: a side-by-side run's target being predicted, with the targets finished before it (:meth:`Journal.target_begins`)
    side_by_side: Optional[dict] = None


def last_word(path) -> "tuple[bool, Optional[int]]":
    """``(anything journaled, the exit code the child ended with)`` from the journal's ends alone (a finished
    journal is cut after its ``F`` slot; one whose writer died ends in NUL bytes): a long journal is not read
    whole to learn that nothing is lost."""
    try:
        with open(path, "rb") as journal:
            journaled = journal.read(1) not in (b"", b"\0")
            size = journal.seek(0, os.SEEK_END)
            if size < _SLOT or size % _SLOT:
                return journaled, None
            journal.seek(size - _SLOT)
            last = journal.read(_SLOT)
    except OSError:
        return False, None
    kind, _, _, _, code, _, _ = _SLOT_LAYOUT.unpack(last)
    return journaled, (code if kind == b"F" else None)


def _parse_meta(facts: list) -> tuple:
    return tuple((str(device), str(dtype), tuple(int(d) for d in shape), int(size))
                 for device, dtype, shape, size in facts)


def read_journal(path) -> JournalContents:
    """Read a journal back. Slots never written (taken by a thread the death stopped before it wrote) read as NUL
    bytes and are passed over; a slot that makes no sense (torn by the death, or naming what was never written)
    is passed over too; the NUL bytes past the last record end the reading."""
    contents = JournalContents()
    try:
        with open(path, "rb") as journal:
            data = journal.read()
    except OSError:
        return contents
    used = len(data.rstrip(b"\0"))
    whole = min(len(data) // _SLOT, -(-used // _SLOT)) * _SLOT  # a slot cut off by the file's end is not read
    reading = _Reading(contents)
    view = memoryview(data)
    for number, fields in enumerate(_SLOT_LAYOUT.iter_unpack(view[:whole])):
        if fields[0] == b"\0":
            continue
        try:
            reading.slot(number, fields, view)
        except (ValueError, KeyError, IndexError, TypeError):
            continue
    contents.running = sorted(reading.begun.values(), key=lambda call: call.number)
    return contents


class _Reading:
    """What reading a journal holds while it goes: the strings so far and the calls begun, not yet returned."""

    def __init__(self, contents: JournalContents):
        self.contents = contents
        self.pieces: dict = {}
        self.strings: dict = {}
        self.tails: dict = {}
        self.begun: dict = {}
        self.returned: dict = {}  # begin slot -> its call, for a later G
        self.last_step = 0  # the step of the last call begun (where a W says writing stopped)

    def tail(self, number: int) -> list:
        found = self.tails.get(number)
        if found is None:
            found = self.tails[number] = json.loads(self.strings[number])
        return found

    def slot(self, number: int, fields: tuple, view: memoryview) -> None:
        kind, small, last, named, first, second, third = fields
        contents = self.contents
        if kind == b"S":
            start = number * _SLOT + 8
            self.pieces.setdefault(named, []).append(bytes(view[start:start + min(small, _STRING_PIECE)]))
            if last:
                self.strings[named] = b"".join(self.pieces.pop(named)).decode("utf-8", "replace")
        elif kind == b"B":
            op, phase, module, inputs = self.tail(named)
            self.begun[number] = JournaledCall(number=number, step=first, op=op, phase=phase, module=module,
                                               inputs=_parse_meta(inputs))
            self.last_step = first
        elif kind == b"E":
            source, outputs, fallen, arguments, thread = self.tail(named)
            call = self.begun.pop(first // _SLOT)  # the begin's offset
            call.start_ns, call.elapsed_ns, call.thread = second, third, int(thread)
            call.source, call.outputs = source, _parse_meta(outputs)
            call.fallen, call.arguments, call.returned = tuple(fallen), arguments, True
            contents.calls.append(call)
            if arguments:
                self.returned[call.number] = call
        elif kind == b"G":
            call = self.returned[first // _SLOT]
            call.arguments = written_view_backpropagated(call.arguments)
        elif kind == b"U":
            op, _, _, inputs = self.tail(named)
            contents.unrecorded = JournaledCall(number=-1, op=op, step=0, phase="", module="",
                                                inputs=_parse_meta(inputs))
        elif kind == b"u":
            contents.unrecorded = None
        elif kind == b"D":
            contents.calls.clear()
        elif kind == b"H":  # a recording begins (--replace records twice): its calls are the ones that count
            contents.header = self.strings[named]
            contents.calls.clear()
            contents.steps_taken = None
            contents.step_times_ns.clear()
            contents.refusal = None  # a warm-up step's, taken again recorded
        elif kind == b"P":  # a side-by-side run's next target: what came before is a finished target's
            contents.side_by_side = json.loads(self.strings[named])
            contents.header, contents.unrecorded, contents.steps_taken = None, None, None
            contents.calls.clear()
            contents.step_times_ns.clear()
            contents.refusal = None
            self.begun.clear()
        elif kind == b"T":
            contents.steps_taken = first
        elif kind == b"F":
            contents.finished = first
        elif kind == b"M":
            contents.step_times_ns.append(first)
        elif kind == b"R" and contents.refusal is None:
            words = json.loads(self.strings[named])
            contents.refusal = {**words, "call": first // _SLOT if first >= 0 else None}
        elif kind == b"W":
            contents.stopped = JournalStop(calls=len(contents.calls) + len(self.begun), step=self.last_step,
                                           steps_taken=contents.steps_taken)
        elif kind == b"X":
            contents.os_exit, contents.os_exit_in_thread = first, bool(named)
