"""Re-probe 9: a scanned script's exit handlers run after its threads end, as Python's shutdown runs them.

GIVEN a script whose worker thread (non-daemon) is still filling results when the script's last line returns
WHEN  its ``atexit`` handler writes those results (run at the script's end under dmlprof)
THEN  the handler sees what the thread finished, as under plain python, which joins such threads before its
      exit handlers; it ran while the thread was still working (a results file missing the thread's rows).
      A script stopped by Ctrl-C or SIGTERM, or one that failed, is not held by a thread that never ends.
"""
from __future__ import annotations

import atexit
import threading
import time

import pytest

from dmlprof.runner import user_code
from dmlprof.runner.user_code import exit_handlers_run_at_its_end


@pytest.fixture(autouse=True)
def ended_by_itself(monkeypatch):
    monkeypatch.setattr(user_code, "cut_short", None)


def test_the_handler_runs_after_the_scripts_non_daemon_thread_finished():
    rows, written = [], []
    with exit_handlers_run_at_its_end():
        threading.Thread(target=lambda: (time.sleep(0.3), rows.append("from the thread"))).start()
        atexit.register(lambda: written.append(list(rows)))
    assert written == [["from the thread"]]


def test_a_failing_handler_is_printed_as_python_prints_it_when_the_script_ended_with_an_error(capsys):
    def failing():
        raise ValueError("handler boom")

    with pytest.raises(RuntimeError):
        with exit_handlers_run_at_its_end():
            atexit.register(failing)
            raise RuntimeError("the script's own end (sys.exit(5) becomes dmlprof's error)")
    printed = capsys.readouterr().err
    assert "Exception ignored in atexit callback" in printed and "ValueError: handler boom" in printed
    assert "During handling" not in printed and "user_code.py" not in printed


@pytest.mark.parametrize("ending", [KeyboardInterrupt, ValueError], ids=["interrupted", "failed"])
def test_a_script_that_did_not_end_well_is_not_held_by_its_thread_that_never_ends(ending):
    release = threading.Event()
    started = time.monotonic()
    try:
        with pytest.raises(ending):
            with exit_handlers_run_at_its_end():
                threading.Thread(target=release.wait).start()
                atexit.register(lambda: None)
                raise ending("the script ended before it released its thread")
        assert time.monotonic() - started < 5
    finally:
        release.set()


def test_a_launcher_stop_that_lands_in_a_handler_ends_the_rank_and_is_not_printed_as_ignored(capsys):
    # CI, torch 2.4.1: torchrun's SIGTERM to the surviving rank arrived while Dynamo's exit handler ran; printed as
    # "Exception ignored in atexit callback" with its traceback, the rank's one error line became 44 lines
    from dmlprof.job.rank import LauncherStop

    def stopped_while_running():
        raise LauncherStop()

    with pytest.raises(LauncherStop):
        with exit_handlers_run_at_its_end():
            atexit.register(stopped_while_running)
    assert "Exception ignored" not in capsys.readouterr().err
