"""The re-probe of issue 26 (reliability and security, round 3), kept as tests through the real CLI.

Each case names the defect it keeps out (R2, R8, ...) and checks what a user gets: the exit code, one
``dmlprof: error:`` line and no traceback, and what was kept on disk. The unit-level tests of the same
defects are in tests/unit/test_bad_inputs_below_the_cli.py; the 1,000,000-call bound (R1) is measured by
benchmarks/recording_bound.py.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import SIGNALS_REACH, MODELS, run_cli
from test_bad_inputs import LONG_SCRIPT, contract, error_line, sessions

pytestmark = pytest.mark.slow
POSIX = sys.platform != "win32"
TIMEOUT_S = 900


def _popen(args, cwd, env=None):
    full = dict(os.environ, PYTHONIOENCODING="utf-8", **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "dmlprof", *map(str, args)], cwd=cwd, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8", **SIGNALS_REACH)


def _when_recording(process, marker: Path) -> None:
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)


# -- R8: SIGTERM and SIGHUP keep what was recorded ------------------------------------------------------------------
@pytest.mark.live
@pytest.mark.skipif(not POSIX, reason="POSIX signals")
@pytest.mark.parametrize("signals, code, said", [
    (("SIGTERM",), 143, "stopped by SIGTERM"),
    (("SIGHUP",), 129, "stopped by SIGHUP"),
    (("SIGINT", "SIGTERM", "SIGHUP"), 130, "interrupted"),  # the saving after Ctrl-C is not cut short
])
def test_r8_a_signal_during_a_long_recording_keeps_a_partial_session(tmp_path, signals, code, said):
    (tmp_path / "long.py").write_text(LONG_SCRIPT.format(mark_at=25_000), encoding="utf-8")
    marker = tmp_path / "marker"
    process = _popen(["scan", "long.py"], tmp_path, env={"DMLPROF_TEST_MARKER": str(marker)})
    _when_recording(process, marker)
    process.send_signal(getattr(signal, signals[0]))
    said_first = process.stderr.readline()  # "saving the N op calls recorded so far": the saving has begun
    for name in signals[1:]:  # each while it saves
        process.send_signal(getattr(signal, name))
    stdout, stderr = process.communicate(timeout=600)
    stderr = said_first + stderr
    # (CI once saw exit 0 and nothing on stderr here, not reproduced in 16 runs: what the scan said tells which
    # side lost the signal)
    assert process.returncode == code, f"stderr: {stderr!r}\nstdout's end: {stdout[-1500:]}"
    assert "Traceback" not in stderr
    (path,) = sessions(tmp_path / "reports")
    meta = json.loads(path.read_text(encoding="utf-8"))["meta"]
    assert meta["partial"] is True and said in meta["partial_reason"]
    assert stderr.strip().splitlines()[-1].startswith(f"dmlprof: error: {said}")


NOHUP_SCRIPT = '''\
import os, torch
x = torch.ones(4)
for i in range(30_000):
    x = x + 1
    if i == 25_000:
        with open(os.environ["DMLPROF_TEST_MARKER"], "w") as marker:
            marker.write("recording")
'''


def _sighup_ignored() -> None:  # as nohup starts a program
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@pytest.mark.live
@pytest.mark.skipif(not POSIX, reason="POSIX signals")
def test_under_nohup_a_closed_terminal_does_not_end_the_scan(tmp_path):
    (tmp_path / "train.py").write_text(NOHUP_SCRIPT, encoding="utf-8")
    marker = tmp_path / "marker"
    env = dict(os.environ, PYTHONIOENCODING="utf-8", DMLPROF_TEST_MARKER=str(marker))
    process = subprocess.Popen([sys.executable, "-m", "dmlprof", "scan", "train.py"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                               preexec_fn=_sighup_ignored)
    _when_recording(process, marker)
    process.send_signal(signal.SIGHUP)  # to the supervisor, as a closing terminal sends it
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, f"stderr: {stderr!r}"
    (path,) = sessions(tmp_path / "reports")
    meta = json.loads(path.read_text(encoding="utf-8"))["meta"]
    assert meta["partial"] is False and "30001 op calls" in stdout


# -- R9: a script that replaces or closes sys.stdout -----------------------------------------------------------------
LOGGING_SCRIPT = '''\
import sys, torch
log = open("train.log", "w")
sys.stdout = log
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    model(torch.randn(3, 4)).sum().backward(); opt.step(); opt.zero_grad()
    print("step", i, flush=True)  # the scan stops the script at its second step, before log.close()
log.close()
sys.__stdout__.close()
'''


@pytest.mark.live
def test_r9_the_report_goes_to_the_terminal_not_the_scripts_log(tmp_path):
    (tmp_path / "train.py").write_text(LOGGING_SCRIPT, encoding="utf-8")
    result = run_cli("scan", "train.py", "--steps", "1", cwd=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "op calls" in result.stdout and "session saved to" in result.stdout
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    assert "step 0" in log and "op calls" not in log


# -- R10: a script whose forked child trains ---------------------------------------------------------------------
FORKING_SCRIPT = '''\
import os, torch
def train():
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(8):
        model(torch.randn(3, 4)).sum().backward(); opt.step(); opt.zero_grad()
    return i + 1
pid = os.fork()
if pid == 0:
    print("child took", train(), "steps", flush=True)
else:
    _, status = os.waitpid(pid, 0)
    print("child exited", os.waitstatus_to_exitcode(status), flush=True)
    train()
'''


@pytest.mark.live
@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX")
@pytest.mark.parametrize("flags", [[], ["--no-profiler"]])
def test_r10_a_forked_child_trains_as_without_dmlprof_and_only_the_parent_reports(tmp_path, flags):
    (tmp_path / "fork.py").write_text(FORKING_SCRIPT, encoding="utf-8")
    result = run_cli("scan", "fork.py", *flags, cwd=tmp_path, timeout=300)  # hung for ever with the profiler
    assert result.returncode == 0, result.stderr
    assert "child took 8 steps" in result.stdout and "child exited 0" in result.stdout
    assert result.stdout.count("session saved to") == 1 and len(sessions(tmp_path / "reports")) == 1


# -- R22: a training thread stopped at the end of the window -------------------------------------------------------
@pytest.mark.live
def test_r22_a_script_training_on_a_thread_ends_without_a_traceback(tmp_path):
    (tmp_path / "threaded.py").write_text(
        "import threading, torch\n"
        "def train():\n"
        "    model = torch.nn.Linear(4, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for i in range(20):\n"
        "        model(torch.randn(3, 4)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "t = threading.Thread(target=train); t.start(); t.join()\n"
        "print('main ran on')\n", encoding="utf-8")
    result = run_cli("scan", "threaded.py", cwd=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr and "WindowClosed" not in result.stderr
    assert "main ran on" in result.stdout and "3 recorded after 1 warm-up" in result.stdout


# -- R18: --json - is all that standard output holds -----------------------------------------------------------------
@pytest.mark.live
def test_r18_a_scripts_prints_do_not_break_the_json_on_stdout(tmp_path):
    (tmp_path / "talks.py").write_text(
        "import os, torch\nprint('hello from the script')\nos.system('echo hello from a subprocess')\n"
        "model = torch.nn.Linear(4, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for i in range(3):\n"
        "    model(torch.randn(3, 4)).sum().backward(); opt.step(); opt.zero_grad(); print('step', i)\n",
        encoding="utf-8")
    result = run_cli("scan", "talks.py", "--steps", "1", "--json", "-", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["op_calls"] > 0  # what | jq reads
    assert "hello from the script" in result.stderr and "hello from a subprocess" in result.stderr


# -- R25: a script running torch.profiler itself -----------------------------------------------------------------------
@pytest.mark.live
def test_r25_a_script_with_its_own_profiler_scanned_to_its_end_keeps_both(tmp_path):
    (tmp_path / "own.py").write_text(
        "import torch\nmodel = torch.nn.Linear(8, 4); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "with torch.profiler.profile() as prof:\n"
        "    for i in range(6):\n"
        "        model(torch.randn(4, 8)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "print('profiled', len(prof.key_averages()) > 0)\n", encoding="utf-8")
    result = run_cli("scan", "own.py", "--run-to-end", cwd=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "profiled True" in result.stdout and "started torch.profiler itself" in result.stdout
    assert len(sessions(tmp_path / "reports")) == 1


# -- R3, R11, R12, R19, R6: the check command and the one error line --------------------------------------------
def test_r3_check_junit_naming_the_model_leaves_it_untouched(tmp_path):
    (tmp_path / "m.py").write_text(contract(), encoding="utf-8")
    result = run_cli("check", "m.py", "--target", "dml", "--junit", "m.py", cwd=tmp_path)
    assert result.returncode == 2 and "--junit m.py is the input file itself" in error_line(result)
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == contract()


def test_r11_check_on_a_machine_without_accelerator_is_refused(tmp_path):
    (tmp_path / "m.py").write_text(contract(), encoding="utf-8")
    result = run_cli("check", "m.py", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 2 and "check on the CPU cannot fail" in error_line(result)


@pytest.mark.live
def test_r12_a_model_that_fails_under_check_still_writes_its_junit(tmp_path):
    (tmp_path / "m.py").write_text(contract(forward="raise ValueError('boom')"), encoding="utf-8")
    result = run_cli("check", "m.py", "--target", "dml", "--junit", "check.xml", cwd=tmp_path)
    assert result.returncode == 3 and "boom" in error_line(result)
    case = ET.parse(tmp_path / "check.xml").getroot().find("testsuite/testcase")
    assert case.find("error") is not None and "boom" in case.find("error").get("message")


def test_r19_an_empty_output_name_is_one_line(tmp_path):
    (tmp_path / "m.py").write_text(contract(), encoding="utf-8")
    result = run_cli("scan", "m.py", "--json", "", cwd=tmp_path)
    assert result.returncode == 2 and "--json is given an empty name" in error_line(result)


def test_r6_an_error_line_naming_a_hostile_path_shows_its_control_characters(tmp_path):
    result = run_cli("scan", "m\x1b]2;pwned\x07.py", cwd=tmp_path)
    assert result.returncode == 2
    line = error_line(result)
    assert "\x1b" not in line and "\x07" not in line and "\\x1b]2;pwned\\x07" in line


# -- R2, R15: distributed runs ---------------------------------------------------------------------------------
@pytest.mark.live
def test_r2_two_nproc_scans_started_together_keep_both_runs(tmp_path):
    lenet = MODELS / "lenet5.py"
    results = {}

    def scan(batch_size):
        results[batch_size] = run_cli("scan", lenet, "--device", "cpu", "--nproc", "2", "--steps", "1",
                                      "--batch-size", batch_size, "--json", f"run{batch_size}.json", "--quiet",
                                      cwd=tmp_path, timeout=TIMEOUT_S)

    threads = [threading.Thread(target=scan, args=(size,)) for size in (2, 6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for size, result in results.items():
        assert result.returncode == 0, result.stderr
        report = json.loads((tmp_path / f"run{size}.json").read_text(encoding="utf-8"))
        assert report["meta"]["batch_size"] == size and report["ranks_found"] == [0, 1]
    folders = sorted(p for p in (tmp_path / "reports").iterdir() if p.is_dir())
    assert len(folders) == 2 and all(len(list(f.glob("rank*.session.json"))) == 2 for f in folders)


@pytest.mark.live
@pytest.mark.skipif(not POSIX, reason="RLIMIT_FSIZE plays the full disk")
def test_r15_a_full_disk_under_nproc_is_exit_2_in_one_line_and_leaves_no_temp_file(tmp_path):
    def limited():  # the ranks may write nothing bigger than 4 KiB: their sessions do not fit
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    result = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(MODELS / "lenet5.py"), "--device", "cpu",
                             "--nproc", "2", "--steps", "1", "--no-profiler"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT_S, preexec_fn=limited)
    assert result.returncode == 2, result.stderr
    assert "cannot write the session" in error_line(result)
    assert not list((tmp_path / "reports").rglob("*.tmp"))
