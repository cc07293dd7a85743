"""Re-probe 13 (docs/probe13.md, cases 17-20 and 22): a process ended by ``os._exit`` from a thread, an exit handler or
the script's last line, after (or during) its recorded steps.

GIVEN a model file whose thread calls ``os._exit(0)``, and scripts ending by ``os._exit`` after their recorded window
WHEN  the scan's child journals the call and the supervisor salvages the journal (in-process: no scan subprocess)
THEN  the model file's run is exit 3 from any thread, a salvaged model file's session keeps its measured steps'
      times, and a script that took all its recorded steps is not said to have stopped early.
"""
from __future__ import annotations

import argparse
import json
import os
import threading

import pytest

from dmlprof import salvage, survival
from dmlprof.record import journal as journal_module
from dmlprof.record.journal import Journal, read_journal
from dmlprof.runner import user_code

pytestmark = pytest.mark.live  # the runner's exit paths, on torch 2.4.1 too

_WINDOW = {"warmup_steps": 1, "steps_requested": 3, "optimizer_steps_taken": 0, "window_closed": False,
           "run_to_end": True}


def _journal(tmp_path, run_mode: str, **meta) -> Journal:
    from dmlprof.schema import empty_ops_frame
    from dmlprof.session import Session

    journal = Journal(tmp_path / "calls.journal")
    journal.header(Session(meta={"kind": "live", "model": "train.py", "title_name": "train", "run_mode": run_mode,
                                 "backend": "cpu", "device": "cpu", **meta}, ops=empty_ops_frame()).to_json())
    cpu = ("cpu", "float32", (4,), 16)
    journal.end(journal.begin("aten::add_.Tensor", 1, "optimizer", "optimizer.SGD", [cpu]), [], 0, 5, 1, "train.py:9")
    return journal


def _salvaged(tmp_path, monkeypatch, journal: Journal, status: int = 0) -> "tuple[int, dict]":
    from dmlprof.cli import build_parser

    journal.close()
    monkeypatch.chdir(tmp_path)
    args, _ = build_parser().parse_known_args(["scan", "train.py", "--quiet"])
    code = salvage.salvage(args, journal.path, tmp_path / "crash.log", survival.ABRUPT, status)
    saved = sorted((tmp_path / "reports").glob("*.session.json"))
    return code, json.loads(saved[-1].read_text(encoding="utf-8"))["meta"] if saved else {}


def test_os_exit_in_another_thread_is_journaled_as_the_scanned_codes_own(tmp_path, monkeypatch):
    # re-probe 13 case 22: only the main thread's was journaled; a model file's watchdog thread ended its run exit 0
    journal = Journal(tmp_path / "calls.journal")
    ended = []
    monkeypatch.setattr(survival, "_supervised", True)
    monkeypatch.setattr(survival, "_crash_log_fd", None)
    monkeypatch.setattr(journal_module, "_process_journal", journal)
    monkeypatch.setattr(os, "_exit", ended.append)  # the real one the trap calls after journaling
    with user_code.hard_exit_trapped():
        watchdog = threading.Thread(target=lambda: os._exit(0))
        watchdog.start()
        watchdog.join()
    journal.close()
    contents = read_journal(journal.path)
    assert ended == [0]
    assert (contents.os_exit, contents.os_exit_in_thread) == (0, True)
    contents.header = '{"meta": {"run_mode": "contract"}}'
    assert salvage.os_exit_words(argparse.Namespace(model="model.py"), contents, "model.py:19", 0) == (
        "a thread of model.py called os._exit(0) at model.py:19, after 0 measured step(s)", 3)


def test_a_model_files_run_ended_from_a_thread_is_exit_3_and_keeps_its_measured_steps_times(tmp_path, monkeypatch):
    journal = _journal(tmp_path, "contract", warmup_steps=1, steps=0)
    journal.step_time(250_000_000)
    journal.step_time(260_000_000)
    journal.os_exit(0, in_thread=True)
    code, meta = _salvaged(tmp_path, monkeypatch, journal)
    assert code == 3
    assert meta["step_times_ms"] == [250.0, 260.0] and meta["steps"] == 2  # was "1 warm-up + 0 measured steps"
    assert "times of its 2 measured step(s)" in meta["notes"][-1]


def test_a_model_files_abrupt_end_of_status_0_is_exit_3(tmp_path, monkeypatch):
    # an end nothing journaled (abort() on Windows, a native exit): a model file's run never succeeds so
    code, meta = _salvaged(tmp_path, monkeypatch, _journal(tmp_path, "contract"))
    assert code == 3 and meta["partial"]


@pytest.mark.parametrize("exit_code, status", [(None, 0), (0, 0), (3, 3)])
def test_a_script_ended_after_its_recorded_steps_is_whole_and_said_to_have_ended_there(tmp_path, monkeypatch,
                                                                                        capsys, exit_code, status):
    # re-probe 13 cases 17-20: "PARTIAL SESSION  The run stopped early" for a run that finished its recorded window
    journal = _journal(tmp_path, "script", script_window=_WINDOW)
    for taken in range(1, 6):  # the window (1 + 3) closed one step before the end
        journal.step_taken(taken)
    if exit_code is not None:  # else an end nothing journaled
        journal.os_exit(exit_code, in_thread=True)
    code, meta = _salvaged(tmp_path, monkeypatch, journal, status)
    said = capsys.readouterr().err
    assert code == (0 if status == 0 else 3)
    assert not meta["partial"] and "after its recorded steps" in said, said
    assert "no step times" not in meta["notes"][-1]


def test_a_script_ended_abruptly_inside_its_recorded_steps_is_still_partial(tmp_path, monkeypatch):
    journal = _journal(tmp_path, "script", script_window=_WINDOW)
    journal.step_taken(1)
    journal.step_taken(2)
    code, meta = _salvaged(tmp_path, monkeypatch, journal)
    assert code == 0 and meta["partial"]


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSEGV"])
def test_a_script_killed_after_its_recorded_steps_is_whole_and_said_to_have_died_there(tmp_path, monkeypatch,
                                                                                        capsys, how):
    # re-probe 18 case 12: the OOM killer's SIGKILL after every recorded step, "The run stopped early ... The figures
    # cover only the steps that ran", a partial session, though the window was whole
    from dmlprof.cli import build_parser

    journal = _journal(tmp_path, "script", script_window=_WINDOW)
    for taken in range(1, 6):
        journal.step_taken(taken)
    journal.close()
    monkeypatch.chdir(tmp_path)
    args, _ = build_parser().parse_known_args(["scan", "train.py", "--quiet"])
    code = salvage.salvage(args, journal.path, tmp_path / "crash.log", how, -9)
    said = capsys.readouterr().err
    meta = json.loads(sorted((tmp_path / "reports").glob("*.session.json"))[-1].read_text(encoding="utf-8"))["meta"]
    assert code == salvage.CRASHED_EXIT_CODE and f"died of {how}, after its recorded steps" in said, said
    assert not meta["partial"]
