"""Re-probe 14 (docs/probe14.md, cases 35-37): a refused call, then the process ended by ``os._exit``.

GIVEN a run whose call the device refuses (an FFT under ``--target dml``: it ends real torch-directml's process), after
      which the process ends through ``os._exit`` (an exit handler's ``os._exit(0)``, a launch script's ``except
      BaseException: ...; os._exit(1)``), or a model file's exit handler ends dmlprof's own process with status 0
WHEN  the supervisor salvages the child's journal, or passes on the child's last word (in-process: no scan subprocess)
THEN  the refusal leads: exit 4, the session's finding is the refused call (not a call run on the device), whatever
      status the script's ``os._exit`` gave.
"""
from __future__ import annotations

import json

import pytest

from dmlprof import salvage, survival
from dmlprof.record.journal import Journal, read_journal

pytestmark = pytest.mark.live  # the runner's exit paths, on torch 2.4.1 too

_EXPLANATION = "complex tensors abort torch-directml: a ComplexFloat tensor on the DirectML device ends the process"
_WORDS = {"op": "aten::_fft_r2c", "kind": "aborts", "message": "Invalid or unsupported data type ComplexFloat.",
          "explanation": _EXPLANATION, "remedy": "keep complex values off the device", "went_on": True}


def _refusing_journal(tmp_path, run_mode: str = "script", went_on: bool = True) -> Journal:
    """A journal of a recorded add, the refused rfft (raised in its place: it returns, failed), and a call after it."""
    from dmlprof.schema import empty_ops_frame
    from dmlprof.session import Session

    journal = Journal(tmp_path / "calls.journal")
    journal.header(Session(meta={"kind": "live", "model": "train.py", "title_name": "train", "run_mode": run_mode,
                                 "backend": "dml", "device": "privateuseone:0"}, ops=empty_ops_frame()).to_json())
    dml = ("privateuseone", "float32", (4, 8), 128)
    journal.end(journal.begin("aten::add.Tensor", 1, "forward", "", [dml]), [dml], 0, 5, 1, "train.py:9")
    refused = journal.begin("aten::_fft_r2c", 1, "forward", "", [dml])
    journal.end(refused, [], 10, 5, 1, "train.py:12")
    journal.refusal(refused, json.dumps({**_WORDS, "went_on": went_on}))
    journal.end(journal.begin("aten::abs", 1, "forward", "", [dml]), [dml], 20, 5, 1, "train.py:13")
    return journal


def _salvaged(tmp_path, monkeypatch, journal: Journal, status: int, command: str = "scan") -> "tuple[int, dict]":
    from dmlprof.cli import build_parser

    journal.close()
    monkeypatch.chdir(tmp_path)
    args, _ = build_parser().parse_known_args([command, "train.py", "--quiet", "--target", "dml"])
    code = salvage.salvage(args, journal.path, tmp_path / "crash.log", survival.ABRUPT, status)
    saved = sorted((tmp_path / "reports").glob("*.session.json"))
    return code, json.loads(saved[-1].read_text(encoding="utf-8")) if saved else {}


def test_a_refusal_is_journaled_with_its_call_and_read_back(tmp_path):
    contents = read_journal(_refusing_journal(tmp_path).path)
    refused = next(call for call in contents.calls if call.op == "aten::_fft_r2c")
    assert contents.refusal is not None and contents.refusal["call"] == refused.number
    assert contents.refusal["explanation"] == _EXPLANATION


@pytest.mark.parametrize("os_exit_code, command", [(0, "check"), (1, "scan"), (0, "scan")])
def test_a_refused_call_then_os_exit_is_exit_4_leading_with_the_refusal(tmp_path, monkeypatch, capsys, os_exit_code,
                                                                        command):
    # cases 36 (atexit os._exit(0): check passed, exit 0) and 37 (except BaseException: os._exit(1): exit 3, the FFT
    # held as run on the device)
    journal = _refusing_journal(tmp_path)
    journal.os_exit(os_exit_code, in_thread=False)
    code, session = _salvaged(tmp_path, monkeypatch, journal, os_exit_code, command)
    said = capsys.readouterr().err
    assert code == 4, said
    line = next(line for line in said.splitlines() if line.startswith("dmlprof: error:"))
    assert _EXPLANATION in line and "aten::_fft_r2c" in line and "os._exit" in line, line
    meta = session["meta"]
    assert meta["partial"] and meta["failed_op"] == "aten::_fft_r2c" and meta["failed_source"] == "train.py:12"
    failure = meta["device_failure"]
    assert (failure["op"], failure["kind"], failure["explanation"]) == ("aten::_fft_r2c", "aborts", _EXPLANATION)
    assert failure["calls_after"] == 1  # the emulated device raised in its place: the code ran on, recorded
    ops = session["ops"]
    refused = ops["op"].index("aten::_fft_r2c")
    assert ops["evidence"][refused] == "refused", ops["evidence"]


def test_a_call_refused_in_place_keeps_no_call_after_it(tmp_path, monkeypatch):
    # real torch-directml: dmlprof refused the call before it ran; the process would have ended there
    journal = _refusing_journal(tmp_path, went_on=False)
    journal.os_exit(0, in_thread=True)
    code, session = _salvaged(tmp_path, monkeypatch, journal, 0)
    assert code == 4
    assert session["ops"]["op"][-1] == "aten::_fft_r2c"
    assert session["meta"]["device_failure"].get("calls_after") is None


def test_a_model_files_run_whose_refusal_ends_it_keeps_exit_4_over_a_contract_os_exit(tmp_path, monkeypatch):
    journal = _refusing_journal(tmp_path, run_mode="contract")
    journal.os_exit(0, in_thread=False)
    code, session = _salvaged(tmp_path, monkeypatch, journal, 0)
    assert code == 4 and session["meta"]["device_failure"]["op"] == "aten::_fft_r2c"


def test_an_exit_handlers_os_exit_after_the_last_word_does_not_replace_the_scans_exit_code(tmp_path, monkeypatch,
                                                                                             capsys):
    # case 35: a model file's build_model registered atexit(os._exit, 0); it ran after dmlprof's exit 4 was said
    journal = tmp_path / "calls.journal"
    ended = Journal(journal)
    ended.finished(4)

    class _Child:
        def wait(self):
            return 0  # the handler's os._exit(0)

    monkeypatch.setattr(survival, "_journal_folder", lambda: tmp_path)
    monkeypatch.setattr(survival, "_start", lambda command, env: _Child())
    monkeypatch.setattr(survival, "shutil", type("NoRemoval", (), {"rmtree": staticmethod(lambda *a, **k: None)}))
    assert survival.supervise(["check", "model.py"], None) == 4
    assert "status 0" in capsys.readouterr().err


def test_the_recorder_journals_the_call_the_device_refuses_with_its_finding(tmp_path, monkeypatch,
                                                                           emulated_dml_backend):
    # the cause of cases 35-37: the refused call was journaled as any call that returned, and nothing said it was
    # refused, so a salvaged session held it as run on the device
    import torch

    from dmlprof.record.recorder import Recorder

    monkeypatch.setattr(emulated_dml_backend, "first_refusal", None)
    journal = Journal(tmp_path / "calls.journal")
    x = torch.randn(4, 8, device=emulated_dml_backend.device())
    with Recorder(emulated_dml_backend) as recorder:
        recorder.journal = journal
        with pytest.raises(RuntimeError):
            torch.fft.rfft(x)
    journal.close()
    contents = read_journal(journal.path)
    refused = next(call for call in contents.calls if call.op == "aten::_fft_r2c")
    assert contents.refusal is not None and contents.refusal["call"] == refused.number
    assert contents.refusal["kind"] == "aborts" and contents.refusal["went_on"]
    assert contents.refusal["explanation"].startswith("complex tensors abort torch-directml")


def test_an_unsupervised_scans_os_exit_after_a_refusal_ends_the_process_with_exit_4(monkeypatch, capfd):
    # nothing salvages an unsupervised scan (DMLPROF_NO_SUPERVISOR, the Python API): the os._exit(0) was its exit 0
    import os
    import types

    from dmlprof.errors import CallRefused
    from dmlprof.record.recorder import Recorder
    from dmlprof.runner import user_code

    backend = types.SimpleNamespace(first_refusal=CallRefused(RuntimeError("torch-directml ends the process here")))
    monkeypatch.setattr(Recorder, "current", types.SimpleNamespace(backend=backend))
    monkeypatch.setattr(survival, "_supervised", False)
    ended = []
    monkeypatch.setattr(os, "_exit", ended.append)  # the real one the trap calls
    with user_code.hard_exit_trapped():
        os._exit(0)
    assert ended == [4]
    assert "after a call the device refused (torch-directml ends the process here)" in capfd.readouterr().err
