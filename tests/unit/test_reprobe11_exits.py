"""Re-probe 11 (issue 33, docs/probe11.md): the ways a scanned program ends, as plain python ends it.

GIVEN a script that calls ``os._exit`` inside ``try/finally`` or a ``__del__``, starts a ``dmlprof scan`` of its own,
      raises KeyboardInterrupt in an exit handler, or ends with ``sys.exit(256)`` / ``sys.exit(True)``
WHEN  dmlprof runs it (in-process: the runner's and the supervisor's helpers, no scan subprocess)
THEN  nothing of the script runs after its ``os._exit``, the inner scan supervises its own child, the handler's
      KeyboardInterrupt is ignored as Python ignores it, and the status is the one the process would have.
"""
from __future__ import annotations

import argparse
import atexit
import os

import pytest

from dmlprof import interrupts, salvage, survival
from dmlprof.record import journal as journal_module
from dmlprof.record.journal import Journal, read_journal
from dmlprof.runner import user_code

pytestmark = pytest.mark.live  # the runner's exit paths, on torch 2.4.1 too


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the trapped process ends for real: a forked child holds it")
def test_os_exit_in_the_scanned_main_thread_ends_the_process_there_and_no_finally_or_catch_all_runs(tmp_path):
    # re-probe 11 cases 1 and 52: HardExit, raised in its place, ran the finally, was caught, and the script went on
    ran = tmp_path / "ran"
    pid = os.fork()
    if pid == 0:  # the scanned process (unsupervised: nothing journals; it ends all the same)
        end = os._exit  # the real one: this child must never go back into pytest
        try:
            with user_code.hard_exit_trapped():
                try:
                    try:
                        os._exit(5)
                    finally:
                        ran.write_text("finally ran")
                except BaseException:  # a crash logger's catch-all
                    pass
                ran.write_text("went on")
        finally:
            end(99)
    _, status = os.waitpid(pid, 0)
    assert (os.WIFEXITED(status), os.WEXITSTATUS(status)) == (True, 5)
    assert not ran.exists()


def test_a_supervised_childs_os_exit_is_journaled_and_said_as_the_scripts_own_end(tmp_path, monkeypatch):
    journal = Journal(tmp_path / "calls.journal")
    crash_log = tmp_path / "crash.log"
    fd = os.open(crash_log, os.O_WRONLY | os.O_CREAT, 0o600)
    monkeypatch.setattr(survival, "_supervised", True)
    monkeypatch.setattr(survival, "_crash_log_fd", fd)
    monkeypatch.setattr(journal_module, "_process_journal", journal)
    try:
        assert survival.os_exit_journaled(2)
    finally:
        os.close(fd)
        journal.close()
    contents = read_journal(journal.path)
    assert contents.os_exit == 2 and contents.finished is None  # not a last word: the parent finishes the scan
    assert __file__.rsplit(os.sep, 1)[-1] in crash_log.read_text(encoding="utf-8")  # the stack names the line
    args = argparse.Namespace(model="train.py")
    assert salvage.os_exit_words(args, contents, "train.py:9", 2) == (
        "train.py exited with status 2 (os._exit) at train.py:9", 3)
    contents.os_exit = 0
    assert salvage.os_exit_words(args, contents, "train.py:9", 0) == (
        "train.py ended its process with os._exit(0) at train.py:9", 0)
    contents.header = '{"meta": {"run_mode": "contract"}}'  # a model file's function has no business ending it
    assert salvage.os_exit_words(args, contents, "", 0) == ("train.py called os._exit(0)", 3)


def test_the_supervised_mark_is_taken_out_of_the_environment_so_a_scan_the_script_starts_supervises_its_own(
        monkeypatch):
    # re-probe 11 case 4: a nested `dmlprof scan` inherited DMLPROF_SUPERVISED, ran unsupervised, lost its recording
    monkeypatch.setenv(survival.CHILD_ENV, "1")
    for name in (journal_module.JOURNAL_ENV, survival.CRASH_LOG_ENV, survival.NO_SUPERVISOR_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(survival, "_supervised", False)
    monkeypatch.setattr(journal_module, "_process_journal", None)
    survival.in_child()
    assert survival._supervised  # this process knows it is the child (its last word, its os._exit journaled)
    assert survival.CHILD_ENV not in os.environ  # what the script's processes inherit
    assert survival.wanted(argparse.Namespace(nproc=None))


def _run_handlers(*handlers) -> None:
    with user_code.exit_handlers_run_at_its_end():
        for handler in handlers:
            atexit.register(handler)


def test_a_keyboard_interrupt_an_exit_handler_raises_is_ignored_as_python_ignores_it(capsys, monkeypatch):
    # re-probe 11 case 39: taken for Ctrl-C, it ended a finished run "interrupted [partial session saved]", exit 130
    monkeypatch.setattr(user_code, "cut_short", None)
    ran = []

    def interrupting():
        raise KeyboardInterrupt

    try:
        _run_handlers(lambda: ran.append("registered first, run last"), interrupting)
    except KeyboardInterrupt:  # (out of a test, it would stop pytest's whole session)
        pytest.fail("the handler's KeyboardInterrupt came out of the script's end")
    assert ran == ["registered first, run last"]
    assert "Exception ignored in atexit callback" in capsys.readouterr().err
    # SIGTERM, turned into a KeyboardInterrupt by dmlprof, still stops it (plain python dies of it)
    with pytest.raises(interrupts.Stopped):
        _run_handlers(lambda: (_ for _ in ()).throw(interrupts.Stopped(15)))


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (True, 1), (2, 2), ("fatal: no config", 1),
                                          (256, 0 if os.name == "posix" else 256),
                                          (-1, 255 if os.name == "posix" else 0xFFFFFFFF)])
def test_a_scripts_exit_status_is_the_one_its_process_would_have(code, status):
    # re-probe 11 cases 6 and 8: "exited with status 256" (plain python: 0), "exited with status True" (1)
    assert user_code.exit_status(code) == status


def test_a_death_after_a_call_of_no_tensor_inputs_is_said_without_an_empty_part():
    # re-probe 11 case 33: "after its last recorded call aten::empty_strided (; in OptimizedModule)"
    call = journal_module.JournaledCall(number=0, op="aten::empty_strided", step=0, phase="forward",
                                        module="OptimizedModule", inputs=())
    assert salvage.crash_message("SIGKILL", None, "", call) == (
        "the scanned process died of SIGKILL between op calls, after its last recorded call aten::empty_strided "
        "(in OptimizedModule)")
    call.module = ""
    assert salvage.crash_message("SIGKILL", call, "", None) == \
        "the scanned process died of SIGKILL in aten::empty_strided"


def test_a_check_of_a_script_that_ended_with_os_exit_0_is_still_held_to_its_limits(tmp_path, monkeypatch, capsys):
    # the supervisor salvaged its journal and exited 0 without the gate: a fallback passed CI
    from dmlprof.cli import build_parser
    from dmlprof.schema import empty_ops_frame
    from dmlprof.session import Session

    monkeypatch.chdir(tmp_path)
    meta = {"kind": "live", "model": "train.py", "title_name": "train", "run_mode": "script", "backend": "dml",
            "device": "privateuseone:0", "device_name": "a test adapter"}
    journal = Journal(tmp_path / "calls.journal")
    journal.header(Session(meta=meta, ops=empty_ops_frame()).to_json())
    device = ("privateuseone", "float32", (4,), 16)
    journal.end(journal.begin("aten::lerp_.Scalar", 1, "optimizer", "optimizer.AdamW", [device]), [], 0, 5, 1,
                "train.py:9", fallen=("aten::lerp.Scalar_out",))
    journal.os_exit(0)
    journal.close()
    args, _ = build_parser().parse_known_args(["check", "train.py", "--device", "dml", "--junit", "j.xml"])
    code = salvage.salvage(args, journal.path, tmp_path / "crash.log", survival.ABRUPT, 0)
    err = capsys.readouterr().err
    assert code == 6 and "ops that fell back 1 (limit 0)" in err, err
    assert 'failures="1"' in (tmp_path / "j.xml").read_text(encoding="utf-8")
