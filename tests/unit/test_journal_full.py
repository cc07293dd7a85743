"""Re-probe 16, case 34: a journal whose folder filled up stops writing; what its salvage says after that.

GIVEN a journal that cannot grow past its first reservation (the reservation fails as on a full disk)
WHEN  the child goes on recording past it, then dies (or ends with os._exit, or finishes)
THEN  the journal says where it stopped, the salvage names no death site it did not see, and the last word
      (F or X) still fits in the room kept for it.
"""
from __future__ import annotations

import errno
from types import SimpleNamespace

import pytest

from dmlprof import salvage
from dmlprof.record import journal as journal_module
from dmlprof.record.journal import Journal, last_word, read_journal
from dmlprof.schema import empty_ops_frame
from dmlprof.session import Session

F32 = "float32"
ROOM = 8192  # the first reservation: 256 slots, fewer than the calls recorded below


@pytest.fixture
def full_folder(monkeypatch):
    """The folder holds the first reservation and nothing more (every growth fails with ENOSPC)."""
    real = Journal._reserve

    def no_room_to_grow(self, size, fd=None):
        if size > ROOM:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, size, fd)

    monkeypatch.setattr(journal_module, "_FIRST_CHUNK", ROOM)
    monkeypatch.setattr(Journal, "_reserve", no_room_to_grow)


def _filled_journal(tmp_path, steps: int = 30) -> Journal:
    """A script's run of ``steps`` optimizer steps of three calls each, journaled past the folder's room."""
    meta = {"kind": "live", "model": "train.py", "title_name": "train", "run_mode": "script", "backend": "dml",
            "device": "privateuseone:0", "device_name": "a test adapter"}
    journal = Journal(tmp_path / "calls.journal")
    journal.header(Session(meta=meta, ops=empty_ops_frame()).to_json())
    for step in range(1, steps + 1):
        for op, module in (("aten::addmm", "fc"), ("aten::gelu_backward", "act"), ("aten::add_", "")):
            number = journal.begin(op, step, "forward", module, [("privateuseone", F32, (16, 32), 2048)])
            journal.end(number, [("privateuseone", F32, (16, 32), 2048)], 0, 1, 1, "train.py:9")
        journal.step_taken(step)
    return journal


def test_a_full_folder_is_journaled_where_writing_stopped(tmp_path, full_folder):
    journal = _filled_journal(tmp_path)
    contents = read_journal(journal.path)
    stop = contents.stopped
    assert stop is not None and 0 < stop.steps_taken < 30 and stop.step in (stop.steps_taken, stop.steps_taken + 1)
    assert stop.calls == len(contents.calls) + len(contents.running) < 90


def test_the_last_word_still_fits_after_the_stop(tmp_path, full_folder):
    journal = _filled_journal(tmp_path)
    journal.finished(3)
    assert last_word(journal.path) == (True, 3)
    assert read_journal(journal.path).stopped is not None
    (tmp_path / "x").mkdir()
    exited = _filled_journal(tmp_path / "x")
    exited.os_exit(0, in_thread=True)
    contents = read_journal(exited.path)
    assert (contents.os_exit, contents.os_exit_in_thread) == (0, True) and contents.stopped is not None


def test_a_crash_after_the_stop_is_not_put_in_the_last_call_journaled(tmp_path, full_folder, capsys):
    """The probe: 'died of SIGSEGV in aten::gelu_backward (...; in Sequential.5.2)', 18 steps of 30, and no word
    of the full journal."""
    journal = _filled_journal(tmp_path)
    args = SimpleNamespace(command="scan", quiet=True, junit=None, model="train.py", out=str(tmp_path / "out"))
    code = salvage.salvage(args, journal.path, tmp_path / "crash.log", "SIGSEGV", -11)
    err = capsys.readouterr().err
    assert code == salvage.CRASHED_EXIT_CODE
    assert "died of SIGSEGV, after its journal stopped at call" in err and "its folder was full" in err
    assert "last journaled: aten::" in err and " in aten::" not in err and "last recorded call" not in err
    (session_file,) = (tmp_path / "out").rglob("*.session.json")
    session = Session.load(session_file)
    assert session.meta.failed_op is None and session.meta.device_failure is None and session.meta.partial
    assert any("journal stopped at call" in note for note in session.meta.notes)


def test_an_os_exit_after_the_stop_says_the_journal_stopped(tmp_path, full_folder, capsys):
    journal = _filled_journal(tmp_path)
    journal.os_exit(0)
    args = SimpleNamespace(command="scan", quiet=True, junit=None, model="train.py", out=str(tmp_path / "out"))
    assert salvage.salvage(args, journal.path, tmp_path / "crash.log", "an abrupt exit", 0) == 0
    err = capsys.readouterr().err
    assert "os._exit(0)" in err and "after its journal stopped at call" in err and "abruptly" not in err
