"""The journal a scan's child writes as it records, and what its parent makes of a dead child's journal."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from dmlprof import salvage, survival
from dmlprof.record import journal as journal_module
from dmlprof.record.journal import Journal, last_word, read_journal
from dmlprof.schema import empty_ops_frame
from dmlprof.session import Session

F32 = "float32"


def _header() -> str:
    meta = {"kind": "live", "model": "net.py", "title_name": "net", "run_mode": "contract", "backend": "dml",
            "device": "privateuseone:0", "device_name": "a test adapter"}
    return Session(meta=meta, ops=empty_ops_frame()).to_json()


def _journal(tmp_path) -> Journal:
    journal = Journal(tmp_path / "calls.journal")
    journal.header(_header())
    return journal


def test_a_call_that_returned_reads_back_whole_and_one_still_running_is_named(tmp_path):
    journal = _journal(tmp_path)
    first = journal.begin("aten::addmm", 1, "forward", "fc", [("privateuseone", F32, (16, 8), 512)])
    journal.end(first, [("privateuseone", F32, (16, 4), 256)], 1000, 250, 7, "net.py:12",
                fallen=("aten::lerp.Scalar_out",))
    journal.begin("aten::flip", 1, "forward", "body\tname", [("privateuseone", F32, (16, 4), 256)])
    contents = read_journal(journal.path)
    (call,) = contents.calls
    assert (call.op, call.step, call.phase, call.module, call.source) == ("aten::addmm", 1, "forward", "fc", "net.py:12")
    assert call.inputs == (("privateuseone", F32, (16, 8), 512),)
    assert call.outputs == (("privateuseone", F32, (16, 4), 256),)
    assert (call.start_ns, call.elapsed_ns, call.fallen) == (1000, 250, ("aten::lerp.Scalar_out",))
    (running,) = contents.running
    assert running.op == "aten::flip" and running.module == "body\tname"  # a tab in a name stays in the name
    assert json.loads(contents.header)["format"] == "dmlprof-session"


def test_a_line_cut_off_by_the_writers_death_ends_the_reading_without_an_error(tmp_path):
    journal = _journal(tmp_path)
    number = journal.begin("aten::relu", 0, "forward", "", [("cpu", F32, (), 4)])  # a 0-d tensor: no dims
    journal.end(number, [("cpu", F32, (), 4)], 0, 1, 1, "")
    journal.close()
    with open(journal.path, "ab") as cut:
        cut.write(journal_module._BEGIN.pack(b"B", 0, 9)[:11])  # a slot cut short: the process died mid-write
    contents = read_journal(journal.path)
    assert [call.op for call in contents.calls] == ["aten::relu"]
    assert contents.calls[0].inputs == (("cpu", F32, (), 4),)
    assert contents.running == []


def test_dropped_warm_up_rows_and_a_new_recording_start_the_calls_again(tmp_path):
    journal = _journal(tmp_path)
    for op in ("aten::mul.Tensor", "aten::add.Tensor"):
        journal.end(journal.begin(op, 0, "forward", "", []), [], 0, 1, 1, "")
    journal.rows_dropped()
    journal.end(journal.begin("aten::mm", 1, "forward", "", []), [], 0, 1, 1, "")
    assert [call.op for call in read_journal(journal.path).calls] == ["aten::mm"]
    journal.header(_header())  # --replace records a second time
    assert read_journal(journal.path).calls == []


def test_an_unrecorded_call_is_named_only_while_it_runs(tmp_path):
    journal = _journal(tmp_path)
    journal.unrecorded("aten::flip", [("privateuseone", F32, (4,), 16)])
    assert read_journal(journal.path).unrecorded.op == "aten::flip"
    journal.unrecorded_returned()
    assert read_journal(journal.path).unrecorded is None


def test_a_child_that_said_its_last_word_leaves_nothing_to_salvage(tmp_path):
    journal = _journal(tmp_path)
    journal.finished(4)
    assert read_journal(journal.path).finished == 4


def test_the_partial_session_of_a_dead_child_holds_every_returned_call_and_names_the_one_it_died_in(tmp_path):
    journal = _journal(tmp_path)
    number = journal.begin("aten::addmm", 1, "forward", "fc", [("privateuseone", F32, (16, 8), 512)])
    journal.end(number, [("privateuseone", F32, (16, 4), 256)], 10, 5, 1, "net.py:11")
    number = journal.begin("aten::lerp_.Scalar", 1, "optimizer", "optimizer.AdamW", [("privateuseone", F32, (4,), 16)])
    journal.end(number, [], 20, 5, 1, "", fallen=("aten::lerp.Scalar_out",))
    journal.begin("aten::flip", 1, "forward", "body", [("privateuseone", F32, (16, 4), 256)])
    contents = read_journal(journal.path)
    message = salvage.crash_message("SIGSEGV", contents.running[-1], "net.py:12")
    assert message == "the scanned process died of SIGSEGV in aten::flip (float32 [16, 4]; at net.py:12, in body)"
    session = salvage.session_from_journal(contents, message, "the scanned process died of SIGSEGV", "net.py:12")
    ops = session.ops
    assert list(ops["op"]) == ["aten::addmm", "aten::lerp_.Scalar", "aten::flip"]
    assert list(ops["verdict"]) == ["device", "fallback", "device"]
    assert ops["fallback_ops"][1] == "aten::lerp.Scalar_out=1"
    meta = session.meta
    assert meta.partial and meta.partial_reason == message
    assert (meta.failed_op, meta.failed_source, meta.failed_module) == ("aten::flip", "net.py:12", "body")
    assert meta.device_failure.ended_process and meta.device_failure.op == "aten::flip"
    # a file a user opens later: the session saves and loads as any other
    loaded = Session.from_dict(json.loads(session.to_json()))
    assert loaded.meta.device_failure.ended_process and len(loaded.ops) == 3


def test_a_crash_between_op_calls_is_the_users_line_and_no_call_is_blamed(tmp_path):
    journal = _journal(tmp_path)
    journal.end(journal.begin("aten::relu", 1, "forward", "", [("cpu", F32, (2,), 8)]), [], 0, 1, 1, "")
    contents = read_journal(journal.path)
    message = salvage.crash_message("SIGSEGV", None, "train.py:30")
    assert message == "the scanned process died of SIGSEGV at train.py:30, between op calls (native code the script called)"
    session = salvage.session_from_journal(contents, message, "the scanned process died of SIGSEGV", "train.py:30")
    assert session.meta.failed_op is None and session.meta.device_failure is None


FAULTHANDLER_DUMP = """Fatal Python error: Segmentation fault

Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait

Current thread 0x00007f0000000000 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/functional.py", line 80 in flip
  File "{user}", line 7 in forward
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1532 in _call_impl
  File "{user}", line 30 in <module>
"""


def test_the_crash_location_is_the_innermost_line_of_the_users_own_code_in_the_crashing_thread(tmp_path):
    user = tmp_path / "model.py"
    log = tmp_path / "crash.log"
    log.write_text(FAULTHANDLER_DUMP.format(user=user), encoding="utf-8")
    assert salvage.crash_location(log).endswith("model.py:7")
    assert salvage.crash_location(tmp_path / "missing.log") == ""


def test_a_crash_in_a_file_outside_the_working_folder_names_it_whole(tmp_path, monkeypatch):
    # re-probe 14 case 33: "at ../../../tmp/probe14/o5_exit_on_error.py:16" (the recorder names such files whole)
    user = tmp_path / "outside" / "model.py"
    log = tmp_path / "crash.log"
    log.write_text(FAULTHANDLER_DUMP.format(user=user), encoding="utf-8")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert salvage.crash_location(log) == f"{user.as_posix()}:7"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signal numbers")
def test_a_child_killed_by_a_signal_died_of_it_and_one_that_exited_did_not():
    assert survival.died_of(-signal.SIGSEGV) == "SIGSEGV"
    assert survival.died_of(-signal.SIGABRT) == "SIGABRT"
    assert survival.died_of(0) is None and survival.died_of(3) is None and survival.died_of(143) is None


def test_a_journal_whose_writer_died_ends_at_its_last_whole_record_and_one_that_finished_at_its_last_word(tmp_path):
    journal = _journal(tmp_path)
    journal.end(journal.begin("aten::relu", 0, "forward", "", [("cpu", F32, (2,), 8)]), [], 0, 1, 1, "")
    # not closed: the process died here; the file's reserved rest reads as NUL bytes
    assert Path(journal.path).stat().st_size > journal.written
    assert last_word(journal.path) == (True, None)
    assert [call.op for call in read_journal(journal.path).calls] == ["aten::relu"]
    journal.finished(0)
    assert Path(journal.path).stat().st_size == journal.written  # cut to what was written
    assert last_word(journal.path) == (True, 0)
    empty = Journal(tmp_path / "empty.journal")  # a child that recorded nothing: nothing to salvage
    assert last_word(empty.path) == (False, None)


def test_a_journal_grows_past_its_first_reservation_and_reads_back_every_call(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "_FIRST_CHUNK", 4096)
    journal = _journal(tmp_path)
    for index in range(500):  # ~60 KB of records: the file is reserved again several times
        journal.end(journal.begin("aten::add.Tensor", index, "forward", f"layer{index % 7}",
                                  [("cpu", F32, (index, 3), 12 * index)]), [], index, 1, 1, f"net.py:{index}")
    calls = read_journal(journal.path).calls
    assert len(calls) == 500 and calls[-1].step == 499 and calls[-1].inputs == (("cpu", F32, (499, 3), 5988),)
    assert calls[123].source == "net.py:123" and calls[123].module == "layer4"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_never_writes_into_its_parents_journal(tmp_path):
    journal = _journal(tmp_path)
    journal.end(journal.begin("aten::mm", 1, "forward", "", []), [], 0, 1, 1, "")
    pid = os.fork()
    if pid == 0:  # the child: what it would record must not land in the parent's file
        journal.end(journal.begin("aten::child_only", 1, "forward", "", []), [], 0, 1, 1, "")
        journal.finished(9)
        os._exit(0)
    os.waitpid(pid, 0)
    journal.end(journal.begin("aten::relu", 1, "forward", "", []), [], 0, 1, 1, "")
    contents = read_journal(journal.path)
    assert [call.op for call in contents.calls] == ["aten::mm", "aten::relu"] and contents.finished is None


def test_a_death_between_calls_outside_the_users_code_names_the_last_call_that_returned(tmp_path):
    # a lost DirectML device can damage the heap in its call and abort the process only after it returned
    journal = _journal(tmp_path)
    number = journal.begin("aten::native_layer_norm_backward", 1, "backward", "norm", [("privateuseone", F32, (4, 8), 128)])
    journal.end(number, [("privateuseone", F32, (4, 8), 128)], 0, 1, 1, "")
    contents = read_journal(journal.path)
    message = salvage.crash_message("SIGABRT", None, "", contents.calls[-1])
    assert message == ("the scanned process died of SIGABRT between op calls, after its last recorded call "
                       "aten::native_layer_norm_backward (float32 [4, 8]; in norm)")
    assert salvage.crash_message("SIGABRT", None, "", None) == "the scanned process died of SIGABRT"


@pytest.mark.skipif(os.name != "posix", reason="descriptors a script closes and reopens: POSIX numbering")
def test_a_script_that_closes_every_descriptor_and_opens_its_own_file_keeps_it_and_the_journal(tmp_path, monkeypatch):
    """A daemonizing script closes what it inherited (os.closerange(3, N)) and opens its own file on the freed
    number: the journal grew and cut that descriptor, and extended the user's file to 32 MiB of NUL bytes."""
    monkeypatch.setattr(journal_module, "_FIRST_CHUNK", 4096)
    journal = _journal(tmp_path)
    mine = os.stat(journal.path)
    freed = []
    for fd in range(3, 1024):  # what closerange would close: every descriptor of the journal's file
        try:
            found = os.fstat(fd)
        except OSError:
            continue
        if (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino):
            os.close(fd)
            freed.append(fd)
    user_path = tmp_path / "user.txt"
    user_fd = os.open(user_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        assert not freed or user_fd in freed or user_fd < min(freed)  # the user's file took a freed number
        os.write(user_fd, b"USER DATA\n")
        for index in range(500):  # ~60 KB: reserved again several times
            journal.end(journal.begin("aten::add.Tensor", index, "forward", "", [("cpu", F32, (index,), 4)]),
                        [], index, 1, 1, "")
        journal.finished(0)
        os.write(user_fd, b"more\n")  # still the user's, open
    finally:
        os.close(user_fd)
    assert user_path.read_bytes() == b"USER DATA\nmore\n"
    assert len(read_journal(journal.path).calls) == 500 and last_word(journal.path) == (True, 0)


def test_a_child_that_could_not_journal_is_not_said_to_have_died_before_its_recording(tmp_path, capsys):
    """A full temporary folder (a 2 MiB tmpfs as TMPDIR: the journal's 4 MiB could not be reserved) and a crash in
    the third recorded step read 'died of SIGSEGV ..., before the recording began [nothing was recorded]'."""
    from types import SimpleNamespace

    folder = tmp_path / "dmlprof-journal-x"
    folder.mkdir()
    args = SimpleNamespace(command="scan", quiet=True, junit=None)
    assert salvage.salvage(args, folder / "calls.journal", folder / "crash.log", "SIGSEGV", -11) == 7
    err = capsys.readouterr().err
    assert "before the recording began" not in err and "could not be kept in" in err and str(tmp_path) in err
    (folder / "calls.journal").write_bytes(b"\0" * 64)  # opened (reserved), no recording yet: that is still said
    salvage.salvage(args, folder / "calls.journal", folder / "crash.log", "SIGSEGV", -11)
    assert "before the recording began" in capsys.readouterr().err


def test_a_crash_in_the_scripts_own_code_after_its_scan_ended_is_a_crash_and_a_native_exit_handlers_is_not(
        tmp_path, capsys):
    """Re-probe 10: a script's own thread that segfaulted after the main thread ended (plain python: rc 139) was
    'a native library's exit handler; nothing was lost' and exit 0: CI passed a crashing program."""
    from types import SimpleNamespace

    journal = _journal(tmp_path)
    journal.end(journal.begin("aten::relu", 0, "forward", "", [("cpu", F32, (2,), 8)]), [], 0, 1, 1, "")
    journal.finished(0)
    args = SimpleNamespace(command="scan", quiet=True, junit=None)
    log = tmp_path / "crash.log"
    log.write_text(FAULTHANDLER_DUMP.format(user=tmp_path / "train.py"), encoding="utf-8")
    assert salvage.salvage(args, journal.path, log, "SIGSEGV", -11) == survival.CRASHED_EXIT_CODE
    err = capsys.readouterr().err
    assert err.startswith("dmlprof: error: ") and "train.py:7" in err and "after its scan ended" in err
    log.write_text(FAULTHANDLER_DUMP.format(user="/venv/lib/python3.11/site-packages/torch_directml/x.py"))
    assert salvage.salvage(args, journal.path, log, "SIGSEGV", -11) == 0  # no line of the user's: as before
    assert "nothing was lost" in capsys.readouterr().err


def test_a_journal_in_a_nearly_full_folder_starts_small(tmp_path, monkeypatch):
    import errno

    real = journal_module.Journal._reserve

    def full_past_a_megabyte(self, size, fd=None):
        if size > 1 << 20:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, size, fd)

    monkeypatch.setattr(journal_module.Journal, "_reserve", full_past_a_megabyte)
    journal = _journal(tmp_path)
    journal.end(journal.begin("aten::mm", 1, "forward", "", []), [], 0, 1, 1, "")
    assert [call.op for call in read_journal(journal.path).calls] == ["aten::mm"]


def test_no_usable_temporary_folder_runs_the_scan_in_process_with_a_note_not_a_traceback(monkeypatch, capsys):
    import tempfile

    def no_folder(*args, **kwargs):
        raise FileNotFoundError(2, "No usable temporary directory found in ['/tmp', '/var/tmp']")

    monkeypatch.setattr(tempfile, "mkdtemp", no_folder)
    assert survival.supervise(["scan", "x.py"], None) is None
    assert "unjournaled" in capsys.readouterr().err


def test_the_journal_goes_to_a_ram_backed_folder_with_room_unless_the_user_chose_a_temporary_folder(tmp_path, monkeypatch):
    ram, chosen = tmp_path / "ram", tmp_path / "chosen"
    ram.mkdir()
    chosen.mkdir()
    monkeypatch.setattr(survival, "_RAM_FOLDER", ram)
    monkeypatch.setattr(survival, "_RAM_FOLDER_ROOM", 1)
    monkeypatch.setattr(survival.sys, "platform", "linux")
    monkeypatch.delenv("TMPDIR", raising=False)
    assert survival._journal_folder().parent == ram
    monkeypatch.setattr(survival, "_RAM_FOLDER_ROOM", 1 << 62)  # no room there: the temporary folder
    assert survival._journal_folder().parent != ram
    monkeypatch.setattr(survival, "_RAM_FOLDER_ROOM", 1)
    monkeypatch.setenv("TMPDIR", str(chosen))
    monkeypatch.setattr(survival.tempfile, "tempdir", None)  # tempfile reads TMPDIR again
    assert survival._journal_folder().parent == chosen
    monkeypatch.setattr(survival, "_RAM_FOLDER", tmp_path / "none")  # no such folder: the temporary folder
    monkeypatch.delenv("TMPDIR")
    monkeypatch.setattr(survival.tempfile, "tempdir", str(chosen))
    assert survival._journal_folder().parent == chosen


def test_a_journal_that_could_not_grow_still_says_its_last_word(tmp_path, monkeypatch):
    """A full disk (or /dev/shm) at a growth stops the writing; the child that then finishes must still say so, or
    its parent salvages a second, partial session and calls the run an abrupt end."""
    import errno

    real = journal_module.Journal._reserve

    def full_past_the_first_reservation(self, size, fd=None):
        if self._size and size > self._size:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, size, fd)

    monkeypatch.setattr(journal_module, "_FIRST_CHUNK", 4096)
    monkeypatch.setattr(journal_module.Journal, "_reserve", full_past_the_first_reservation)
    journal = _journal(tmp_path)
    for _ in range(200):  # far past 4 KiB: the writing stops at the first growth
        journal.end(journal.begin("aten::mm", 1, "forward", "", []), [], 0, 1, 1, "")
    assert journal._map is None and journal.written < 4096
    journal.finished(0)
    assert last_word(journal.path) == (True, 0)


def test_a_slot_taken_but_never_written_and_a_torn_one_are_passed_over(tmp_path):
    """A thread that took a slot and died (or was stopped by another thread's crash) before writing it leaves NUL
    bytes; one torn mid-copy leaves a kind and nonsense: the calls written after either still read back."""
    journal = _journal(tmp_path)
    journal.end(journal.begin("aten::mm", 1, "forward", "fc", [("cpu", F32, (2, 3), 24)]), [], 0, 1, 1, "net.py:3")
    next(journal._offsets)  # taken, never written
    torn = next(journal._offsets)
    journal._map[torn:torn + 8] = b"E\0\0\0\xff\xff\xff\x7f"  # an end naming a fixed part never written
    number = journal.begin("aten::relu", 1, "forward", "act", [("cpu", F32, (2, 3), 24)])
    journal.end(number, [("cpu", F32, (2, 3), 24)], 5, 2, 1, "net.py:4")
    journal.begin("aten::flip", 1, "forward", "body", [("cpu", F32, (2, 3), 24)])
    contents = read_journal(journal.path)
    assert [(call.op, call.module, call.source) for call in contents.calls] == [
        ("aten::mm", "fc", "net.py:3"), ("aten::relu", "act", "net.py:4")]
    assert [call.op for call in contents.running] == ["aten::flip"]


def test_names_longer_than_a_slot_and_not_ascii_read_back_exactly(tmp_path):
    journal = _journal(tmp_path)
    module = "Net.blöcke.0." + "déjà-vu·" * 20 + "\t\n\"x\""  # many string slots, a character split across two
    source = "モデル.py:12"
    number = journal.begin("aten::addmm", 3, "forward", module, (("cpu", F32, (4, 8), 128), ("cpu", F32, (8,), 32)))
    journal.end(number, (("cpu", F32, (4, 8), 128),), 7, 9, 11, source, ("aten::lerp.Scalar_out",), '{"p": 1}')
    (call,) = read_journal(journal.path).calls
    assert (call.module, call.source, call.step, call.arguments, call.thread) == (module, source, 3, '{"p": 1}', 11)
    assert call.inputs == (("cpu", F32, (4, 8), 128), ("cpu", F32, (8,), 32))
    assert (call.start_ns, call.elapsed_ns, call.fallen) == (7, 9, ("aten::lerp.Scalar_out",))


class _Overload:
    """What the recorder hands the journal: an overload, named by its schema."""

    def __init__(self, name: str, overload: str = ""):
        self._schema = type("Schema", (), {"name": name, "overload_name": overload})()


def test_an_overload_is_named_by_its_schema_and_one_made_later_in_its_place_is_not_taken_for_it(tmp_path):
    """The journal keys a call's fixed part by the overload's id (its hash is Python code): a later object that
    could take a freed id must be named for itself, so each overload keyed is kept alive."""
    journal = _journal(tmp_path)
    facts = (("cpu", F32, (2,), 8),)
    for index in range(50):  # each made and dropped: without keeping them, their ids are reused at once
        number = journal.begin(_Overload(f"aten::op{index}", "Tensor"), 0, "forward", "", facts)
        journal.end(number, facts, 0, 1, 1, "")
    assert [call.op for call in read_journal(journal.path).calls] == [f"aten::op{index}.Tensor" for index in range(50)]


def test_calls_on_several_threads_while_the_journal_grows_all_read_back(tmp_path, monkeypatch):
    import threading

    monkeypatch.setattr(journal_module, "_FIRST_CHUNK", 4096)
    journal = _journal(tmp_path)

    def record(thread: int) -> None:
        for index in range(300):
            facts = (("cpu", F32, (thread, index), 4),)
            number = journal.begin("aten::add.Tensor", index, "forward", f"t{thread}", facts)
            journal.end(number, (), index, thread, thread, f"net.py:{index}")

    threads = [threading.Thread(target=record, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    calls = read_journal(journal.path).calls
    assert len(calls) == 1200
    assert all(call.module == f"t{call.thread}" and call.inputs[0][2] == (call.thread, call.step)
               and call.source == f"net.py:{call.step}" for call in calls)


CRASHING_RECORDER = '''
import ctypes, sys
import torch
from torch import nn
from dmlprof.backends import resolve_backend
from dmlprof.record.journal import Journal
from dmlprof.record.recorder import Recorder

journal = Journal(sys.argv[1])
model = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
recorder = Recorder(resolve_backend("cpu"), sync=False)
recorder.journal = journal
with recorder:
    model(torch.randn(3, 8)).sum().backward()
    dies_in = lambda func, args, kwargs: ctypes.string_at(0) if "relu" in func.name() else None
    recorder.rule = dies_in  # judged once the call is journaled, before it runs: here it dies in the call
    model(torch.randn(3, 8, dtype=torch.float64).float())
'''


@pytest.mark.skipif(sys.platform == "win32", reason="crashes through ctypes.string_at(0)")
def test_a_recorder_that_dies_natively_mid_call_leaves_the_call_named_and_every_call_before_it(tmp_path):
    import subprocess

    script, path = tmp_path / "dies.py", tmp_path / "calls.journal"
    script.write_text(CRASHING_RECORDER, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == -signal.SIGSEGV, done.stderr
    contents = read_journal(path)
    (running,) = contents.running
    assert (running.op, running.phase, running.module) == ("aten::relu", "forward", "Sequential.1")
    assert running.inputs == (("cpu", F32, (3, 4), 48),)
    ops = [call.op for call in contents.calls]
    assert "aten::addmm" in ops and ops.count("aten::relu") == 1 and "aten::threshold_backward" in ops
    assert ops[-1] == "aten::addmm" and contents.calls[-1].outputs == (("cpu", F32, (3, 4), 48),)
    assert all(call.returned and call.thread for call in contents.calls)
    message = salvage.crash_message("SIGSEGV", running, "")
    assert message == "the scanned process died of SIGSEGV in aten::relu (float32 [3, 4]; in Sequential.1)"


def test_a_salvaged_scripts_session_counts_the_optimizer_steps_its_journal_saw_and_says_its_window(tmp_path):
    """Re-probe 12 cases 16/40: a script dead after its steps read "recorded the whole run; 0 optimizer steps"."""
    torch = pytest.importorskip("torch")
    from dmlprof.backends import resolve_backend
    from dmlprof.record.recorder import Recorder
    from dmlprof.record.window import StepWindow
    from dmlprof.render.terminal import render_text

    recorder = Recorder(resolve_backend("cpu"), sync=False)
    recorder.window = StepWindow(warmup=1, steps=2, run_to_end=True)
    meta = {"kind": "live", "model": "train.py", "title_name": "train", "run_mode": "script", "backend": "cpu",
            "device": "cpu", "script_window": recorder.window.describe()}
    recorder.journal = Journal(tmp_path / "calls.journal")
    recorder.journal.header(Session(meta=meta, ops=empty_ops_frame()).to_json())
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    with recorder:
        for _ in range(4):  # 1 warm-up, 2 recorded, 1 run on unrecorded (--run-to-end)
            optimizer.zero_grad()
            (weight * 2).sum().backward()
            optimizer.step()
    contents = read_journal(recorder.journal.path)
    assert contents.steps_taken == 4
    assert {call.step for call in contents.calls} == {0, 1}
    session = salvage.session_from_journal(contents, "died", "the scanned process died of SIGSEGV", "train.py:9")
    assert session.meta.steps == 2
    window = session.meta.script_window
    assert (window.optimizer_steps_taken, window.warmup_steps, window.window_closed) == (4, 1, True)
    assert "script mode, 4 optimizer steps taken: 2 recorded after 1 warm-up, it was stopped" in render_text(session)
