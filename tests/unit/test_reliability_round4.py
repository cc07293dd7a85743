"""Reliability and security, round 4 (issue 33), below the CLI.

Each test names the defect it keeps out (R29, R32, ...).
"""
from __future__ import annotations

import sys

import pytest

POSIX = sys.platform != "win32"


# -- R29: a refusal the script catches does not let it train on --------------------------------------------------
def _refusing_cpu_backend():
    """The CPU backend with real DirectML's guard: FFTs are refused as the abort they are on the device."""
    from dmlprof.backends import resolve_backend
    from dmlprof.backends.dml import DmlBackend
    from dmlprof.directml.failures import ABORTS, COMPLEX_MESSAGE, DirectMLSemantics, Failure

    cpu = resolve_backend("cpu")

    class RefusingCpu(type(cpu)):
        refuses_calls = True
        refusal_for = DmlBackend.refusal_for
        failure_in, note_failure = DirectMLSemantics.failure_in, DirectMLSemantics.note_failure

        def failure_rule(self):
            def rule(func, args, kwargs):
                if func.name().startswith("aten::_fft"):
                    return Failure(ABORTS, COMPLEX_MESSAGE.format(dtype="ComplexFloat"), "SIGABRT")
                return None
            return rule

    return RefusingCpu()


CATCHES_THE_REFUSAL = """\
import sys, torch
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn(4, 8)
    try:
        x = torch.fft.rfft(x).abs()[:, :8]
    except {caught}:
        x = x * 2  # "a CPU fallback": on DirectML the process has already ended at the FFT
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
open(sys.argv[1], "w").write("trained on")
"""


@pytest.mark.parametrize("caught", ["RuntimeError", "Exception", "BaseException"])
def test_r29_a_script_catching_the_guards_refusal_stops_there_with_exit_4(tmp_path, caught):
    from dmlprof import runner

    script = tmp_path / "fft_fallback.py"
    script.write_text(CATCHES_THE_REFUSAL.format(caught=caught), encoding="utf-8")
    marker = tmp_path / "marker.txt"
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=_refusing_cpu_backend(), profiler=False, warmup=0, steps=2,
                    script_args=[str(marker)])
    assert stopped.value.exit_code == 4 and "ends the process" in str(stopped.value)
    assert ("caught dmlprof's refusal" in str(stopped.value)) == (caught == "BaseException")
    assert not marker.exists()  # the script did not run on past the refused call
    session = stopped.value.session
    assert session.meta.partial and "_fft_r2c" in (session.meta.failed_op or "")
    assert session.ops["op"].iloc[-1] == session.meta.failed_op  # nothing after the refused call is kept
    assert session.meta.device_failure is not None and session.meta.device_failure.kind == "aborts"


def test_r29_the_refusal_is_no_exception_a_script_can_swallow():
    from dmlprof.errors import CallRefused

    assert not issubclass(CallRefused, Exception)
    backend = _refusing_cpu_backend()
    from dmlprof.directml.failures import ABORTS, Failure

    refusal = backend.refusal_for(Failure(ABORTS, "x", "SIGABRT"))
    assert isinstance(refusal, CallRefused) and backend.first_refusal is refusal


# -- R36: "out of bounds for storage" is padding's backward only when it is a crop --------------------------------
PAD_BACKWARD = ("ensure_in_bounds: sizes [2, 64, 32, 32], strides [73984, 1156, 34, 1], storage offset 1025, and "
                "itemsize 4 requiring a storage size of 595692 are out of bounds for storage of size 591872")


@pytest.mark.parametrize("message", [
    # a 1 TiB torch.empty on the device: an allocation that came back short
    "ensure_in_bounds: sizes [1099511627776], strides [1], storage offset 0, and itemsize 1 requiring a storage "
    "size of 1099511627776 are out of bounds for storage of size 0",
    # a tensor past 4 GiB, its byte count wrapped
    "ensure_in_bounds: sizes [1200000000], strides [1], storage offset 0, and itemsize 4 requiring a storage size "
    "of 4800000000 are out of bounds for storage of size 505032704",
    # the backward of an overlapping as_strided
    "ensure_in_bounds: sizes [2, 2], strides [1, 2], storage offset 10, and itemsize 4 requiring a storage size "
    "of 56 are out of bounds for storage of size 40",
    # a contiguous run shifted past its storage (each size fills its stride): no dimension is cut
    "ensure_in_bounds: sizes [3, 3], strides [3, 1], storage offset 5, and itemsize 4 requiring a storage size of 56 "
    "are out of bounds for storage of size 36",
])
def test_r36_an_out_of_bounds_view_that_is_no_crop_is_not_explained_as_padding(message):
    from dmlprof.backends.errors import explain_device_error

    found = explain_device_error(RuntimeError(message))
    assert found is None or found.key != "dml_view_beyond_storage"


def test_r36_padding_backward_is_still_explained_as_padding():
    from dmlprof.backends.errors import explain_device_error

    assert explain_device_error(RuntimeError(PAD_BACKWARD)).key == "dml_view_beyond_storage"
    assert explain_device_error(RuntimeError("ensure_in_bounds: cropping the start")).key == "dml_view_beyond_storage"


# -- R34: a damaged session is one line, not a traceback -----------------------------------------------------------
def _saved_then_damaged(tmp_path, damage):
    import json

    from session_factory import fallback_mix

    path = fallback_mix().save(tmp_path / "s.session.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    damage(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("tolerances", [[1, 2], "tight", 3, {"float32": [1e-5, 1e-6]}])
def test_r34_verify_tolerances_of_another_type_are_a_damaged_session(tmp_path, tolerances):
    from dmlprof.errors import SessionFileError
    from dmlprof.session import Session

    path = _saved_then_damaged(tmp_path, lambda d: d.setdefault("extras", {}).update(
        verify={"checked_calls": 1, "tolerances": tolerances}))
    with pytest.raises(SessionFileError, match="extras.verify.tolerances"):
        Session.load(path)


@pytest.mark.parametrize("column", ["ranges", "shapes"])
def test_r34_json_text_nested_a_thousand_deep_is_a_damaged_session(tmp_path, column):
    from dmlprof.errors import SessionFileError
    from dmlprof.session import Session

    deep = "[" * 1000 + "]" * 1000
    path = _saved_then_damaged(tmp_path, lambda d: d["ops"].update({column: [deep] * len(d["ops"]["op"])}))
    with pytest.raises(SessionFileError, match=f"ops.{column}.0. nests deeper"):
        Session.load(path)


def test_r34_range_text_readers_survive_any_depth():
    from dmlprof.schema import parse_ranges

    assert parse_ranges("[" * 5000 + "]" * 5000) == []
    assert parse_ranges('[[["nested"], 1], ["step", 2]]') == [("step", 2)]


# -- R35: the shipped truth table missing or damaged is a note, and the doctor says so ----------------------------
@pytest.mark.parametrize("content, word", [
    (None, "missing"), ("{not json", "damaged"), ('{"format": "dmlprof-measured-table", "ops": [1, 2]}', "damaged"),
    ('{"format": "dmlprof-measured-table", "ops": {"aten::add.Tensor": {"float32": {"wrong": "x"}}}}', "damaged"),
    ("[" * 100_000 + "]" * 100_000, "damaged"),
])
def test_r35_a_missing_or_damaged_truth_table_is_a_one_line_note(tmp_path, monkeypatch, capsys, content, word):
    from dmlprof.doctor.packages import check_measured_table
    from dmlprof.doctor.snapshot import Snapshot
    from dmlprof.tables import measured

    if content is not None:
        (tmp_path / measured.SHIPPED["dml"]).write_text(content, encoding="utf-8")
    monkeypatch.setattr(measured, "DATA_DIR", tmp_path)
    measured.load_measured.cache_clear()
    try:
        assert measured.load_measured("dml") is None
        measured.load_measured("dml")  # once a process
    finally:
        measured.load_measured.cache_clear()
    err = capsys.readouterr().err
    assert err.count("dmlprof: note:") == 1 and word in err and "not flagged" in err and "Traceback" not in err
    problem = measured.measured_table_problem("dml")
    row = check_measured_table(Snapshot(measured_table_problem=problem))
    assert row is not None and row.status == "warn" and word in row.detail


def test_r35_the_shipped_truth_table_reads_and_the_doctor_is_quiet_about_it():
    from dmlprof.doctor.packages import check_measured_table
    from dmlprof.doctor.snapshot import Snapshot
    from dmlprof.tables.measured import measured_table_problem

    assert measured_table_problem("dml") == ""
    assert check_measured_table(Snapshot()) is None


# -- R37, R41: a signal while a finished run is saved, or just after, ends with its status and one line -----------
TINY_SCRIPT = """\
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
"""

SIGNAL_AT = """\
import os, signal, sys
import dmlprof.output, dmlprof.runner.run
from dmlprof.cli import main
where, signame = sys.argv[1], sys.argv[2]
def sending(original):
    def send(*args, **kwargs):
        if where == "after":
            result = original(*args, **kwargs)
            os.kill(os.getpid(), getattr(signal, signame))
            return result
        os.kill(os.getpid(), getattr(signal, signame))
        return original(*args, **kwargs)
    return send
if where == "processing":
    dmlprof.runner.run.Run._finish = sending(dmlprof.runner.run.Run._finish)
elif where == "last":  # after the report and its files, before the command's exit code is said (its last word)
    dmlprof.runner.loss_problem = sending(dmlprof.runner.loss_problem)
else:  # just after "session saved"
    dmlprof.output.print_saved = sending(dmlprof.output.print_saved)
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.skipif(not POSIX, reason="sends itself POSIX signals")
@pytest.mark.parametrize("where, signame, code", [("processing", "SIGTERM", 143), ("processing", "SIGHUP", 129),
                                                  ("processing", "SIGINT", 130), ("after", "SIGTERM", 143),
                                                  ("last", "SIGTERM", 143), ("last", "SIGHUP", 129)])
def test_r37_r41_a_signal_while_or_after_a_finished_run_is_saved_gives_its_exit_status(tmp_path, where, signame, code):
    import os
    import subprocess
    from pathlib import Path

    from conftest import SIGNALS_REACH

    script = tmp_path / "tiny.py"
    script.write_text(TINY_SCRIPT, encoding="utf-8")
    driver = tmp_path / "driver.py"
    driver.write_text(SIGNAL_AT, encoding="utf-8")
    # in the process that scans (DMLPROF_NO_SUPERVISOR: as the supervised child does; the patches above apply)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "DMLPROF_NO_SUPERVISOR": "1"}
    done = subprocess.run([sys.executable, str(driver), where, signame, "scan", str(script), "--device", "cpu",
                           "--no-profiler", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300, **SIGNALS_REACH)
    assert done.returncode == code, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("dmlprof: error:")]
    assert len(errors) == 1 and ("interrupted" if signame == "SIGINT" else f"stopped by {signame}") in errors[0]
    assert "session saved to" in errors[0] or "session saved to" in done.stdout
    assert len(list((tmp_path / "out").glob("*.session.json"))) == 1  # the finished run's session is kept, once


# -- R32: a build killed mid-way hands the emulated device's build over at once -----------------------------------
KILLED_BUILD = """\
import os, sys
from pathlib import Path
from dmlprof.testing.building import build_lock
folder = Path(sys.argv[1])
with build_lock(folder):
    (folder / "lock").write_text("")  # torch's FileBaton, taken inside, as cpp_extension.load does
    os._exit(9)  # killed mid-build: nothing after this runs, no finally
"""


def test_r32_the_lock_of_a_killed_build_is_taken_over_at_once_and_torchs_lock_cleared(tmp_path):
    import os
    import subprocess
    import time
    from pathlib import Path

    from dmlprof.testing.building import LOCK_NAME, build_lock

    script = tmp_path / "killed.py"
    script.write_text(KILLED_BUILD, encoding="utf-8")
    folder = tmp_path / "build"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, str(script), str(folder)], env=env, timeout=120, capture_output=True)
    assert done.returncode == 9 and (folder / LOCK_NAME).exists() and (folder / "lock").exists()
    started = time.monotonic()
    with build_lock(folder, poll_s=0.01):
        assert not (folder / "lock").exists()  # torch's FileBaton would have waited on it forever
    assert time.monotonic() - started < 5 and not (folder / LOCK_NAME).exists()


def test_r32_a_live_holder_is_waited_for_and_a_dead_one_is_not(tmp_path):
    import json
    import os
    import socket

    from dmlprof.files import process_alive
    from dmlprof.testing.building import LOCK_NAME, _abandoned

    lock = tmp_path / LOCK_NAME
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}), encoding="utf-8")
    assert process_alive(os.getpid()) and not _abandoned(lock)
    lock.write_text(json.dumps({"pid": os.getpid(), "host": "another-machine"}), encoding="utf-8")
    assert not _abandoned(lock)  # a shared folder's lock from elsewhere cannot be judged: it is waited for


# -- R40: a compiler killed mid-build: the error line gives the cause, not the cut-off compile command --------------
COMPILE = ("c++ -MMD -MF emulated.o.d -DTORCH_EXTENSION_NAME=dmlprof_emulated_dml -isystem /usr/include/python3.11 "
           "-fPIC -std=c++17 -O1 -c /src/emulated.cpp -o emulated.o")


@pytest.mark.parametrize("output, says", [
    (f"[1/2] {COMPILE}\nFAILED: emulated.o\n{COMPILE}\nc++: fatal error: Killed signal terminated program cc1plus\n"
     "compilation terminated.\nninja: build stopped: subcommand failed.\n", "Killed signal terminated program cc1plus"),
    (f"[1/2] {COMPILE}\nFAILED: emulated.o\n{COMPILE}\n/src/emulated.cpp:1:10: fatal error: torch/extension.h: "
     "No such file or directory\nninja: build stopped: subcommand failed.\n", "torch/extension.h"),
    (f"[1/2] {COMPILE}\nFAILED: emulated.o\n{COMPILE}\nninja: build stopped: subcommand failed.\n", "killed by SIGKILL"),
])
def test_r40_a_failed_build_says_why_in_its_error_line(output, says):
    import subprocess

    from dmlprof.testing.building import build_failure

    try:
        try:
            raise subprocess.CalledProcessError(-9 if "killed by" in says else 1, ["ninja", "-v"])
        except subprocess.CalledProcessError as error:
            raise RuntimeError(f"Error building extension 'dmlprof_emulated_dml': {output}") from error
    except RuntimeError as exc:
        line = build_failure(exc)
    assert says in line and "-MMD" not in line and "\\n" not in line


# -- R33: the recording is bounded by bytes too, and stops the profiler when it fills ----------------------------
def test_r33_calls_of_many_tensors_fill_the_recorder_by_bytes_and_stop_what_waits_on_rows():
    import torch

    from dmlprof.backends import resolve_backend
    from dmlprof.record import budget
    from dmlprof.record.recorder import Recorder

    parts = [torch.zeros(2) for _ in range(500)]
    recorder = Recorder(resolve_backend("cpu"), sync=False)
    recorder.max_bytes, stopped = 5 * budget.row_bytes((None,) * 501, ()), []
    recorder.when_rows_reach(10**6, lambda: stopped.append(len(recorder.rows)))  # the profiler's cap, far off
    recorder._arm()
    with recorder:
        for _ in range(40):
            out = torch.cat(parts)
    assert recorder.full and len(recorder.rows) == 5 and recorder.filled_at == [5]
    assert stopped == [5]  # what waited on the rows ran when they stopped growing
    assert out.shape == (1000,)  # every call ran, recorded or not


def test_r33_a_profiler_that_runs_out_of_memory_as_it_stops_loses_its_results_not_the_run():
    from dmlprof.backends import resolve_backend
    from dmlprof.record.profiler import ProfilerAlongside

    class Exhausted:
        def __exit__(self, *exc):
            raise MemoryError("std::bad_alloc")

    profiler = ProfilerAlongside(resolve_backend("cpu"))
    with profiler:
        profiler._prof.__exit__(None, None, None)  # stop the real one; the stand-in fails as Kineto did
        profiler._prof = Exhausted()
    assert profiler.lost and "results were lost" in profiler.note()
    assert profiler.op_events().empty


CAT_500 = """\
import torch
parts = [torch.zeros(2) for _ in range(500)]
for _ in range({calls}):
    torch.cat(parts)
"""


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="caps the address space with RLIMIT_AS")
def test_r33_a_stepless_loop_of_cat_over_500_tensors_fits_a_4_gb_cap_and_is_saved(tmp_path):
    import os
    import subprocess
    from pathlib import Path

    script = tmp_path / "cat500.py"
    script.write_text(CAT_500.format(calls=45_000), encoding="utf-8")
    cap = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30)); "
           "sys.argv = ['dmlprof'] + sys.argv[1:]; runpy.run_module('dmlprof', run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", cap, "scan", str(script), "--device", "cpu", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "holds the first" in done.stdout and list((tmp_path / "out").glob("*.session.json"))


# -- R39: a copy off the device to a dtype DirectML cannot hold is no abort ---------------------------------------
def test_r39_a_copy_from_the_device_to_the_cpu_in_bfloat16_is_not_an_abort():
    import torch

    from dmlprof.directml.failures import ABORTS, failure

    on_device = torch.empty(0, 3, device="meta")  # "meta" plays the device: only tensors' devices are read
    to_cpu = failure("aten::_to_copy", (on_device,), {"dtype": torch.bfloat16, "device": torch.device("cpu")}, "meta")
    assert to_cpu is None  # real torch-directml runs it (and returns float32: measured on realdml)
    stays = failure("aten::_to_copy", (on_device,), {"dtype": torch.bfloat16}, "meta")
    onto = failure("aten::_to_copy", (torch.empty(0, 3),), {"dtype": torch.complex64, "device": torch.device("meta")},
                   "meta")
    assert stays is not None and stays.kind == ABORTS and onto is not None and onto.kind == ABORTS


def test_r34_brackets_inside_a_range_name_are_no_nesting(tmp_path):
    import json

    from dmlprof.session import Session

    name = "[" * 200 + '"\\'
    path = _saved_then_damaged(tmp_path, lambda d: d["ops"].update(
        {"ranges": [json.dumps([[name, 1]])] * len(d["ops"]["op"])}))
    assert Session.load(path).ops["ranges"].iloc[0]  # a valid session, however odd its range's name


FFT_MODEL = """\
import torch
from torch import nn

BATCH_SIZE = 4


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 2)

    def forward(self, x):
        return self.fc(torch.fft.rfft(x).abs())


def build_model():
    return Spectral()


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randn(batch_size, 2)
"""


def test_r29_a_model_file_refused_in_warm_up_stops_at_the_recorded_step_as_refused_not_caught(tmp_path):
    from dmlprof import runner

    model = tmp_path / "spectral.py"
    model.write_text(FFT_MODEL, encoding="utf-8")
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(model, backend=_refusing_cpu_backend(), profiler=False, warmup=1, steps=2)
    assert stopped.value.exit_code == 4 and "caught" not in str(stopped.value)
    assert "_fft_r2c" in (stopped.value.session.meta.failed_op or "")


# -- R26 again: a device tensor of 11+ dimensions ends torch-directml's process in any kernel -------------------------
def test_r26_a_tensor_of_eleven_or_more_dimensions_on_the_device_is_an_abort_and_ten_runs():
    """Measured on realdml: torch.zeros([2]*11) on the device, .to() of a [2]*11 / [1]*11 tensor, a + a of [2]*12 and
    add on an 11-D unsqueeze view all die of 'stack smashing detected'; [2]*10 moves and adds; the view itself runs.
    (`scan --target dml` of a [2]*12 add said every call ran on the device.)"""
    import torch

    from dmlprof.directml.failures import ABORTS, failure, rule_for

    def judged(name, args, kwargs=None):  # "cpu" plays the device: these tensors are on it
        return failure(name, args, kwargs or {}, "cpu")

    eleven, ten = torch.zeros([2] * 11), torch.zeros([2] * 10)
    assert judged("aten::add.Tensor", (eleven, eleven)).kind == ABORTS
    assert judged("aten::mul.Tensor", (torch.zeros(1), eleven)).kind == ABORTS
    assert judged("aten::zeros", ([2] * 11,), {"device": "cpu"}).kind == ABORTS
    assert judged("aten::_to_copy", (eleven,), {"device": "cpu"}).kind == ABORTS
    assert judged("aten::add.Tensor", (ten, ten)) is None
    assert judged("aten::zeros", ([2] * 10,), {"device": "cpu"}) is None
    assert judged("aten::unsqueeze", (ten, 0)) is None  # a view is metadata
    assert failure("aten::add.Tensor", (eleven, eleven), {}, "privateuseone") is None  # a CPU tensor's own call
    # the live guard's cheap path reaches it too (add.Tensor of these shapes is no op a rule names)
    rule = rule_for("cpu", True, lambda func: func)
    assert rule("aten::add.Tensor", (eleven, eleven), {}).kind == ABORTS and rule("aten::add.Tensor", (ten, ten), {}) is None


EMULATED_CATCHES_THE_ABORT = """\
import sys, torch
device = torch.device("privateuseone", 0)
model = torch.nn.Linear(8, 8).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    h = model(torch.randn(2, 8, device=device))
    try:
        f = torch.fft.rfft(h).abs()
    except {caught}:  # "a CPU fallback": on torch-directml the process has already ended at the FFT
        f = torch.fft.rfft(h.cpu()).abs().to(device)
    f.sum().backward()
    opt.step()
    opt.zero_grad()
open(sys.argv[1], "w").write("trained on")
"""


@pytest.mark.parametrize("caught", ["RuntimeError", "Exception"])
@pytest.mark.parametrize("warmup", [0, 1])
def test_r29_on_the_emulated_device_a_caught_abort_is_the_runs_finding_and_the_calls_after_it_are_kept(
        tmp_path, emulated_dml_backend, caught, warmup):
    """`scan script.py --target dml` runs a script on the emulated device, whose kernels raise "torch-directml
    ends the process here" where the real one dies: a script's ``except RuntimeError`` caught it and trained on,
    rc 0, the FFT a 'device' call and "every call on device tensors ran on the device". The device still raises
    (a harness of independent samples records on past it), but the run ends with that call as its finding."""
    from dmlprof import runner
    from dmlprof.report import build_report

    script = tmp_path / "fft_fallback.py"
    script.write_text(EMULATED_CATCHES_THE_ABORT.format(caught=caught), encoding="utf-8")
    marker = tmp_path / "marker.txt"
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=emulated_dml_backend, profiler=False, warmup=warmup, steps=2,
                    script_args=[str(marker)])
    assert stopped.value.exit_code == 4
    assert "ends the process" in str(stopped.value) and "caught the emulated device's error" in str(stopped.value)
    # the failing call joins the user's line, once, at the end
    assert str(stopped.value).count("fft_fallback.py:8") == 1
    assert str(stopped.value).endswith("this call (at aten::_fft_r2c, " + str(script) + ":8)")
    session = stopped.value.session
    failure = session.meta.device_failure
    assert failure is not None and failure.kind == "aborts" and failure.op == "aten::_fft_r2c"
    assert session.meta.partial is False  # the script ran on: whole, not "partial session saved"
    assert failure.source.endswith("fft_fallback.py:8")
    ops = list(session.ops["op"])
    first = ops.index("aten::_fft_r2c")
    assert failure.calls_after == len(ops) - first - 1 > 0  # recorded on past it, and counted
    assert ops.count("aten::_fft_r2c") >= 2  # the later steps' calls are kept
    report = build_report(session)
    assert report.notes[0].label == "Fails on the device" and "never run" in report.notes[0].text
    assert report.verdict.tone == "bad"


# -- faulthandler's dump lands in no file of the user's after the script closed what it inherited ------------------
CLOSES_EVERY_DESCRIPTOR_THEN_DIES = """\
import os, sys
from dmlprof import survival
survival.in_child()  # the scan's child: its crash log open, faulthandler writing to it
os.closerange(3, 65536)  # a daemonizing script closes what it inherited
user = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)  # the lowest free number
os.write(user, b"USER LOG\\n")
os.abort()  # then dies natively: faulthandler dumps Python's stack to its descriptor's number
"""


@pytest.mark.skipif(not POSIX, reason="descriptor numbering after os.closerange, and SIGABRT's dump: POSIX")
def test_faulthandlers_crash_dump_never_lands_in_a_file_the_script_opened_after_closing_every_descriptor(tmp_path):
    """The crash log's descriptor was a low number: a script that closed it (os.closerange) and opened its own file
    on the freed number had Python's stack ("Fatal Python error: Aborted") written into that file at its death."""
    import os
    import subprocess

    from dmlprof import survival

    script, user, crash_log = tmp_path / "daemon.py", tmp_path / "user.log", tmp_path / "crash.log"
    script.write_text(CLOSES_EVERY_DESCRIPTOR_THEN_DIES, encoding="utf-8")
    env = dict(os.environ, **{survival.CHILD_ENV: "1", survival.CRASH_LOG_ENV: str(crash_log)})
    env.pop("DMLPROF_JOURNAL", None)
    done = subprocess.run([sys.executable, str(script), str(user)], env=env, capture_output=True, timeout=120)
    assert done.returncode != 0  # it died, as it meant to
    assert user.read_bytes() == b"USER LOG\n"


# -- a SIGKILLed supervisor's journal folder is removed by a later scan, and nothing else is ------------------------
@pytest.mark.skipif(not POSIX, reason="flock and process ids: POSIX (Windows keeps its folders)")
def test_a_killed_supervisors_journal_folder_is_removed_and_no_live_or_foreign_one(tmp_path):
    import os
    import subprocess
    import time

    from dmlprof import survival

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    old = time.time() - 3600

    def folder(name, *, age=old):
        made = tmp_path / name
        made.mkdir()
        (made / "crash.log").write_text("", encoding="utf-8")
        (made / "calls.journal").write_bytes(b"\0" * 16)
        os.utime(made, (age, age))
        return made

    killed = folder(f"{survival.JOURNAL_FOLDER_PREFIX}{dead_pid}-a1")
    live = folder(f"{survival.JOURNAL_FOLDER_PREFIX}{os.getpid()}-b2")
    older_naming = folder("dmlprof-journal-12345678")  # an older dmlprof's (no pid in the name): never judged
    young = folder(f"{survival.JOURNAL_FOLDER_PREFIX}{dead_pid}-c3", age=time.time())
    held = folder(f"{survival.JOURNAL_FOLDER_PREFIX}{dead_pid}-d4")  # its pid not seen here, its lock held
    emptied = folder(f"{survival.JOURNAL_FOLDER_PREFIX}{dead_pid}-e5")  # its files gone: no lock to ask
    for made in emptied.iterdir():
        made.unlink()
    os.utime(emptied, (old, old))
    holder = os.open(held / "crash.log", os.O_RDONLY)
    try:
        assert survival._lock(holder)
        removed = survival.remove_stale_journal_folders(tmp_path)
    finally:
        os.close(holder)
    assert removed == [killed, emptied] and not killed.exists() and not emptied.exists()
    assert live.exists() and older_naming.exists() and young.exists() and held.exists()


CATCHES_THE_REFUSAL_THEN_RUNS_ON = """\
import sys, torch
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    x = torch.randn(4, 8)
    if step == 1:
        try:
            x = torch.fft.rfft(x).abs().repeat(1, 2)[:, :8]
        except BaseException:
            x = x * 2
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
open(sys.argv[1], "w").write("ran to its end")
"""


def test_r29_with_run_to_end_a_script_that_caught_a_refusal_goes_no_further_than_that_step(tmp_path):
    """--run-to-end lets a script finish after its recorded steps: one that caught a refusal in them (except
    BaseException) ran on to its end (its files written, hours of training) before the scan stopped with exit 4."""
    from dmlprof import runner

    script = tmp_path / "fft_then_on.py"
    script.write_text(CATCHES_THE_REFUSAL_THEN_RUNS_ON, encoding="utf-8")
    marker = tmp_path / "marker.txt"
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=_refusing_cpu_backend(), profiler=False, warmup=0, steps=3,
                    script_args=[str(marker)], run_to_end=True)
    assert stopped.value.exit_code == 4 and "caught dmlprof's refusal" in str(stopped.value)
    assert not marker.exists()
    assert stopped.value.session.meta.script_window.optimizer_steps_taken == 2  # the step of the refusal, no more


# -- a script that restarts itself (os.execv) is stopped there, said, not 'ended abruptly' ----------------------------
RESTARTS_ITSELF = """\
import os, sys, torch
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
if not os.environ.get("RESTARTED"):
    os.environ["RESTARTED"] = "1"
    os.execv(sys.executable, [sys.executable] + sys.argv)
"""


@pytest.mark.slow
def test_a_script_that_replaces_its_process_is_stopped_there_and_says_so(tmp_path):
    """os.execv replaced the scan's child with a plain python running the script again, unrecorded: the
    supervisor found a child that ended without its last word and salvaged a 'partial' session of a process that
    'ended abruptly (os._exit() outside the main thread, or abort())'."""
    import json
    import os
    import subprocess

    script = tmp_path / "restarts.py"
    script.write_text(RESTARTS_ITSELF, encoding="utf-8")
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("RESTARTED", None)
    done = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(script), "--device", "cpu", "--warmup", "0",
                           "--steps", "2", "--run-to-end", "--no-profiler", "--out", str(tmp_path / "r"),
                           "--json", str(tmp_path / "r.json")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "abrupt" not in done.stdout + done.stderr
    notes = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["meta"]["notes"]
    assert any("os.execv(" in note and "not scanned" in note for note in notes)


REEXECS_FIRST_THING = """\
import os, sys
if os.environ.get("PROBE_REEXECED") != "1":  # re-exec with the environment a library needs, as launchers do
    os.environ["PROBE_REEXECED"] = "1"; os.environ["OMP_NUM_THREADS"] = "1"
    os.execv(sys.executable, [sys.executable] + sys.argv)
import torch
print(float((torch.ones(3) * 2).sum()))
"""


def test_a_script_that_restarts_itself_before_any_op_says_so_and_what_to_set(tmp_path):
    """Re-probe 18, 18: a script re-executing itself first thing (after setting OMP_NUM_THREADS) ended "is neither
    a model file ... nor a script that runs PyTorch ops: it ran none", as if it were no script at all; set as the
    script sets it, the variables make it run on without restarting, and it is scanned."""
    import os
    import subprocess

    script = tmp_path / "reexecs.py"
    script.write_text(REEXECS_FIRST_THING, encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if name not in ("PROBE_REEXECED", "OMP_NUM_THREADS")}
    command = [sys.executable, "-m", "dmlprof", "scan", str(script), "--device", "cpu", "--no-profiler", "--out",
               str(tmp_path / "r")]
    done = subprocess.run(command, env=dict(env, TMPDIR=str(tmp_path)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "ran none" not in done.stderr
    error = done.stderr.strip().splitlines()
    assert len(error) == 1 and "replaced its process (os.execv(" in error[0]
    assert "PROBE_REEXECED=1 OMP_NUM_THREADS=1" in error[0]
    again = subprocess.run(command, env=dict(env, TMPDIR=str(tmp_path), PROBE_REEXECED="1", OMP_NUM_THREADS="1"),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "6.0" in again.stdout


CATCHING_MODEL = FFT_MODEL.replace("        return self.fc(torch.fft.rfft(x).abs())", """\
        try:
            f = torch.fft.rfft(x).abs()
        except RuntimeError:  # "a CPU fallback": on torch-directml the process has already ended at the FFT
            f = torch.fft.rfft(x.cpu()).abs().to(x.device)
        return self.fc(f)""")


def test_r29_a_prediction_of_a_model_that_catches_the_abort_ends_with_it_and_keeps_the_calls_after(tmp_path):
    """`scan model.py --target dml`: the stand-in raised "torch-directml ends the process here" at the FFT, the
    model's ``except RuntimeError`` caught it, and the prediction said 'every call ran on the device', rc 0."""
    from dmlprof import runner
    from dmlprof.predict import predict_scan

    assert "except RuntimeError" in CATCHING_MODEL
    model = tmp_path / "spectral_fallback.py"
    model.write_text(CATCHING_MODEL, encoding="utf-8")
    with pytest.raises(runner.ScanStopped) as stopped:
        predict_scan(model, batch_size=2)
    assert stopped.value.exit_code == 4 and "caught the prediction's error" in str(stopped.value)
    failure = stopped.value.session.meta.device_failure
    assert failure.op == "aten::_fft_r2c" and failure.kind == "aborts" and failure.calls_after > 0


def test_r29_check_fails_a_model_that_catches_the_abort_and_its_report_leads_with_it(tmp_path, capsys):
    import json

    from dmlprof.cli import main

    model = tmp_path / "spectral_fallback.py"
    model.write_text(CATCHING_MODEL, encoding="utf-8")
    out = tmp_path / "r"
    assert main(["check", str(model), "--target", "dml", "--out", str(out)]) == 4
    assert "caught the prediction's error" in capsys.readouterr().err
    session = next(out.glob("*.session.json"))
    assert main(["report", str(session), "--json", str(tmp_path / "r.json")]) == 0
    notes = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["notes"]
    assert notes[0]["label"] == "Fails on the device" and "never run on DirectML" in notes[0]["text"]


def test_r29_a_profiled_block_that_catches_the_emulated_abort_has_it_as_its_finding(emulated_dml_backend):
    """dmlprof.profile() (the notebook's API) on the emulated device: a block whose ``except RuntimeError`` caught
    the FFT's "ends the process here" gave a session in which every call ran on the device."""
    import torch

    import dmlprof
    from dmlprof.report import build_report

    device = emulated_dml_backend.device()
    with dmlprof.profile(backend=emulated_dml_backend, profiler=False) as run:
        h = torch.randn(2, 8, device=device)
        try:
            f = torch.fft.rfft(h).abs()
        except RuntimeError:
            f = torch.fft.rfft(h.cpu()).abs().to(device)
        (f * 2).sum()
    failure = run.session.meta.device_failure
    assert failure is not None and failure.op == "aten::_fft_r2c" and failure.calls_after > 0
    assert build_report(run.session).notes[0].label == "Fails on the device"
    assert emulated_dml_backend.first_refusal is None  # said once: the next block starts clean
