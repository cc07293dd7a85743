"""Re-probe 15 (docs/probe15.md, cases 11-13, 15-17): a call the device refuses where nothing records it, then the
process ended by ``os._exit`` or a stop signal.

GIVEN the emulated DirectML device raising its error in place of a call that ends torch-directml's process (an FFT),
      caught where nothing records the call: another thread, a forked DataLoader worker, a step past the recorded
      ones (the device notes it, docs/exit_codes.md)
WHEN  the script then ends with ``os._exit(0)`` (in that thread, or the main thread), supervised or not, or the scan
      is sent SIGTERM (a scheduler's)
THEN  the refusal leads: exit 4, its finding naming the op and where it ran, not "check passed" (exit 0) or 143.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dmlprof import salvage, survival
from dmlprof.record import journal as journal_module
from dmlprof.record.journal import Journal, read_journal

POSIX = sys.platform != "win32"
pytestmark = [
    pytest.mark.live,  # the device's note and the runner's exit paths, on torch 2.4.1 too
    pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning"),
]
_REPO = Path(__file__).resolve().parents[2]


SCRIPT = """\
import os, sys, threading, torch
from torch.utils.data import DataLoader, Dataset
device = torch.device("privateuseone", 0)
model = torch.nn.Linear(8, 8).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def spectral(x, exit_here=False):  # "a CPU fallback": on torch-directml the process has already ended at the FFT
    try:
        return torch.fft.rfft(x).abs().repeat(1, 2)[..., :8]
    except RuntimeError:
        if exit_here:
            os._exit(0)
        return x

class Spectra(Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return spectral(torch.randn(8, device=device)).cpu()

for n in range(3):  # the recorded steps (2), then one more (--run-to-end)
    model(torch.randn(2, 8, device=device)).sum().backward()
    opt.step()
    opt.zero_grad()
x = torch.randn(2, 8, device=device)
where = sys.argv[1]
if where == "thread":  # case 11: the thread's handler ends the process
    worker = threading.Thread(target=spectral, args=(x, True))
elif where == "thread, exit in main":  # case 12
    worker = threading.Thread(target=spectral, args=(x,))
if where.startswith("thread"):
    worker.start()
    worker.join()
elif where == "forked worker":  # case 16
    for batch in DataLoader(Spectra(), batch_size=2, num_workers=1, multiprocessing_context="fork"):
        model(batch.to(device)).sum()
else:  # case 15: past the recorded steps, on the run's thread
    spectral(x)
os._exit(0)
"""

_WHERE = {"thread": "in another thread", "thread, exit in main": "in another thread",
          "forked worker": "in forked process", "past the recorded steps": "in a step nothing recorded"}


def _scan_ending_in_os_exit(tmp_path, monkeypatch, backend, where: str) -> list:
    """The script scanned in this process up to its ``os._exit(0)`` (the first one the scan traps ends it; the
    stand-in for the real one returns, so the run ends through Python after it); the statuses the real
    ``os._exit`` was called with."""
    from dmlprof import runner
    from dmlprof.interrupts import REAL_OS_EXIT

    ours, ended = os.getpid(), []

    def real_exit(code):  # a forked DataLoader worker's own end is real: it must never go back into pytest
        if os.getpid() != ours:
            REAL_OS_EXIT(code)
        ended.append(code)

    monkeypatch.setattr(os, "_exit", real_exit)  # the real one the trap calls
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    with pytest.raises(runner.ScanStopped):  # past the os._exit it went on, to its end and the refusal's exit 4
        runner.scan(script, backend=backend, profiler=False, warmup=0, steps=2, run_to_end=True, script_args=[where])
    return ended


@pytest.mark.parametrize("where", [pytest.param(where, marks=pytest.mark.skipif(
    where == "forked worker" and not (POSIX and hasattr(os, "fork")), reason="fork is POSIX")) for where in _WHERE])
def test_an_unrecorded_abort_then_os_exit_is_journaled_and_salvaged_with_exit_4(tmp_path, monkeypatch, capsys,
                                                                                emulated_dml_backend, where):
    # cases 11, 12, 15, 16: "note: ... ended its process with os._exit(0)", "check ... passed", exit 0
    from dmlprof.cli import build_parser

    journal = Journal(tmp_path / "calls.journal")
    monkeypatch.setattr(survival, "_supervised", True)
    monkeypatch.setattr(survival, "_crash_log_fd", None)
    monkeypatch.setattr(journal_module, "_process_journal", journal)
    assert _scan_ending_in_os_exit(tmp_path, monkeypatch, emulated_dml_backend, where)[0] == 0  # the script's
    journal.close()
    contents = read_journal(journal.path)
    assert contents.os_exit == 0 and contents.refusal is not None, contents.refusal
    assert contents.refusal["op"].startswith("aten::_fft_r2c, " + _WHERE[where]), contents.refusal
    assert contents.refusal["kind"] == "aborts" and contents.refusal["explanation"]
    capsys.readouterr()
    # the supervisor's salvage of the child that ended there (what `dmlprof check` prints and exits with)
    monkeypatch.chdir(tmp_path)
    args, _ = build_parser().parse_known_args(["check", "train.py", "--quiet", "--target", "dml"])
    code = salvage.salvage(args, journal.path, tmp_path / "crash.log", survival.ABRUPT, 0)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 4, line
    assert line.startswith("dmlprof: error: train.py: ") and "os._exit(0)" in line and _WHERE[where] in line
    meta = json.loads(next((tmp_path / "reports").glob("*.session.json")).read_text(encoding="utf-8"))["meta"]
    assert meta["device_failure"]["op"].startswith("aten::_fft_r2c, " + _WHERE[where])


def test_an_unsupervised_scans_os_exit_after_an_abort_in_another_thread_ends_with_exit_4(tmp_path, monkeypatch,
                                                                                       capfd, emulated_dml_backend):
    # case 13: DMLPROF_NO_SUPERVISOR=1, the thread caught the abort and called os._exit(0): exit 0
    monkeypatch.setattr(survival, "_supervised", False)
    assert _scan_ending_in_os_exit(tmp_path, monkeypatch, emulated_dml_backend, "thread")[0] == 4
    assert "os._exit(0) after a call the device refused" in capfd.readouterr().err


def _journal_with_header(tmp_path) -> Journal:
    from dmlprof.schema import empty_ops_frame
    from dmlprof.session import Session

    journal = Journal(tmp_path / "calls.journal")
    journal.header(Session(meta={"kind": "live", "model": "train.py", "title_name": "train", "run_mode": "script",
                                 "backend": "emulated-dml", "device": "privateuseone:0"},
                           ops=empty_ops_frame()).to_json())
    dml = ("privateuseone", "float32", (4, 8), 128)
    journal.end(journal.begin("aten::addmm", 1, "forward", "", [dml]), [dml], 0, 5, 1, "train.py:9")
    return journal


def test_a_journaled_refusal_leads_over_a_stop_signal_that_killed_the_child(tmp_path, monkeypatch, capsys):
    # case 17, salvaged: a child that died of the scheduler's SIGTERM after the refusal ended with 143, unnamed
    from dmlprof.cli import build_parser

    journal = _journal_with_header(tmp_path)
    journal.refusal(None, json.dumps({"op": "aten::_fft_r2c, in a step nothing recorded", "kind": "aborts",
                                      "message": "Invalid or unsupported data type ComplexFloat.",
                                      "explanation": "complex tensors abort torch-directml", "went_on": True}))
    journal.close()
    monkeypatch.chdir(tmp_path)
    args, _ = build_parser().parse_known_args(["scan", "train.py", "--quiet", "--target", "dml"])
    code = salvage.salvage(args, journal.path, tmp_path / "crash.log", "SIGTERM", -signal.SIGTERM)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 4 and "complex tensors abort torch-directml" in line and "SIGTERM" in line, line


SIGTERM_AFTER_AN_UNRECORDED_ABORT = """\
import os, signal, torch
device = torch.device("privateuseone", 0)
model = torch.nn.Linear(8, 8).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for n in range(4):
    x = torch.randn(2, 8, device=device)
    if n == 3:  # past the recorded steps (--run-to-end)
        try:
            x = torch.fft.rfft(x).abs().repeat(1, 2)[:, :8]
        except RuntimeError:
            pass
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
os.kill(os.getpid(), signal.SIGTERM)  # the scheduler's
"""


@pytest.mark.skipif(not POSIX, reason="a SIGTERM to oneself ends a Windows process outright")
def test_a_sigterm_after_an_unrecorded_abort_ends_the_run_with_the_refusal(tmp_path, emulated_dml_backend):
    # case 17: "stopped by SIGTERM", exit 143; neither the line nor the saved session named the refusal
    from dmlprof import interrupts, runner

    script = tmp_path / "train.py"
    script.write_text(SIGTERM_AFTER_AN_UNRECORDED_ABORT, encoding="utf-8")
    with interrupts.stopping(), pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=emulated_dml_backend, profiler=False, warmup=0, steps=2, run_to_end=True)
    assert stopped.value.exit_code == 4, str(stopped.value)
    assert "ends the process" in str(stopped.value) and "in a step nothing recorded" in str(stopped.value)
    meta = stopped.value.session.meta
    assert meta.device_failure is not None and meta.device_failure.op.startswith("aten::_fft_r2c")
    assert any(note.startswith("stopped by SIGTERM after the refused call") for note in meta.notes), meta.notes


@pytest.mark.slow
def test_check_of_the_probes_thread_then_os_exit_script_fails_with_exit_4(tmp_path):
    # the probe's command line, supervised: the child journals the thread's refusal at the trapped os._exit
    script = _REPO / "docs" / "probe15" / "refusal_in_thread_then_os_exit.py"
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    env.pop(survival.NO_SUPERVISOR_ENV, None)
    done = subprocess.run([sys.executable, "-m", "dmlprof", "check", str(script), "--target", "dml", "--from", "cuda",
                           "--out", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 4, done.stderr
    assert "in another thread than the run's" in done.stderr and "os._exit(0)" in done.stderr
