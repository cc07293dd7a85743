"""The journal: every recorded call written down as it happens, so a process that dies keeps its recording.

A native crash (a SIGSEGV in a backend's kernel, a glog ``abort()`` in torch-directml, the user's own
ctypes) ends the process on the spot: nothing in it runs again, and the rows a recorder holds in memory
die with it. So a scan runs the user's code in a child process (:mod:`dmlprof.survival`) whose recorder
writes each call to this journal twice: before it runs (op, step, phase, module, input dtypes and
shapes: a call that never returns is still named) and after (outputs, time, the fallbacks it raised,
the user's line). Each record is one ``os.write`` of a short line: once the call returns, the bytes
are the operating system's, and survive any death of the writer. The parent reads the journal back
(:func:`read_journal`) and builds the partial session from it.

The format is private to one scan (a temporary file, read once by the process that made it): tab-separated
lines, every string interned once as JSON (``S``), so a call's records are numbers and short shape text.
Nothing here imports torch: the parent reads the journal without it.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from typing import Optional

#: the environment variable that tells a scan's child process where to journal
JOURNAL_ENV = "DMLPROF_JOURNAL"
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)


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
    """Writes a recording's calls to ``path`` as they happen (one ``os.write`` per record).

    :meth:`begin` before a call runs, :meth:`end` once it returned (or raised); calls on several
    threads (autograd's) may interleave, so each names its begin number.
    """

    def __init__(self, path):
        self.path = str(path)
        self._fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        self._strings: dict = {}
        self._calls = 0
        self._lock = threading.Lock()  # autograd's threads record too: records and ids stay whole

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
        try:
            os.write(self._fd, text.encode("utf-8", "replace"))
        except OSError:
            pass  # a full disk must not stop the user's program: the journal only guards against its death

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
        self._write(f"H\t{json.dumps(session_json)}\n")

    def begin(self, op: str, step: int, phase: str, module: str, inputs) -> int:
        """A call about to run; returns its number for :meth:`end`."""
        with self._lock:
            number = self._calls
            self._calls += 1
            self._write(f"B\t{number}\t{self._id(op)}\t{step}\t{self._id(phase)}\t{self._id(module)}\t"
                        f"{_meta_text(inputs)}\n")
        return number

    def end(self, number: int, outputs, start_ns: int, elapsed_ns: int, thread: int, source: str,
            fallen: tuple = (), arguments: str = "") -> None:
        """The call ``number`` returned (or raised): its outputs, its time, what fell back inside it, the
        arguments a wrong-result class is keyed by (JSON text, dmlprof.directml.call_arguments)."""
        with self._lock:
            fallen_ids = ",".join(str(self._id(name)) for name in fallen)
            self._write(f"E\t{number}\t{start_ns}\t{elapsed_ns}\t{thread}\t{self._id(source)}\t"
                        f"{_meta_text(outputs)}\t{fallen_ids}\t{self._id(arguments or '')}\n")

    def unrecorded(self, op: str, inputs) -> None:
        """A call outside the recording about to run (a warm-up step under the device's refusals): not a row,
        but the call to name if the process dies in it."""
        with self._lock:
            self._write(f"U\t{self._id(op)}\t{_meta_text(inputs)}\n")

    def unrecorded_returned(self) -> None:
        self._write("u\n")

    def rows_dropped(self) -> None:
        """A script's warm-up ended: the rows so far are not the recording's."""
        self._write("D\n")

    def finished(self, exit_code: int) -> None:
        """The child said its last word (its report, or its error line): nothing is left to salvage."""
        self._write(f"F\t{int(exit_code)}\n")

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


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
    """``(anything journaled, the exit code the child ended with)`` from the journal's tail alone (a finished
    journal's last line is its ``F`` record): a long journal is not read whole to learn that nothing is lost."""
    try:
        with open(path, "rb") as journal:
            journal.seek(0, os.SEEK_END)
            size = journal.tell()
            journal.seek(max(0, size - 64))
            tail = journal.read().decode("utf-8", "replace")
    except OSError:
        return False, None
    last = tail.rstrip("\n").rsplit("\n", 1)[-1]
    if last.startswith("F\t"):
        try:
            return True, int(last[2:])
        except ValueError:
            pass
    return size > 0, None


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
        begun[number] = JournaledCall(number=number, op=strings[int(fields[2])], step=int(fields[3]),
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
