"""Reliability and security, round 3 (issue 26), below the CLI.

Each test names the defect it keeps out (R1, R3, ...); the CLI-level probes are in
tests/integration/test_bad_inputs_signals_scripts_and_jobs.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dmlprof.errors import UsageError
from session_factory import make_session

POSIX = sys.platform != "win32"


def _args(**values):
    base = {"json": None, "html": None, "trace": None, "junit": None, "tb": None, "out": "reports"}
    return argparse.Namespace(**{**base, **values})


# -- R3, R4, R19: every output option through one check ---------------------------------------------------------
def test_r3_junit_naming_the_model_file_is_refused(tmp_path):
    from dmlprof.output import check_paths

    model = tmp_path / "m.py"
    model.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(UsageError, match="--junit .* is the input file itself"):
        check_paths(_args(junit=str(model)), inputs=[str(model)])


def test_r3_junit_and_json_naming_one_file_is_refused(tmp_path):
    from dmlprof.output import check_paths

    with pytest.raises(UsageError, match="--json and --junit name the same file"):
        check_paths(_args(json=str(tmp_path / "r.json"), junit=str(tmp_path / "r.json")))


def test_r3_only_one_output_may_take_standard_output():
    from dmlprof.output import check_paths

    with pytest.raises(UsageError, match="standard output"):
        check_paths(_args(json="-", junit="-"))


def test_r4_an_output_naming_a_rank_session_of_the_run_folder_read_is_refused(tmp_path):
    from dmlprof.output import check_paths

    (tmp_path / "rank0.session.json").write_text("{}", encoding="utf-8")
    with pytest.raises(UsageError, match="is a file of the input folder"):
        check_paths(_args(json=str(tmp_path / "rank0.session.json")), inputs=[str(tmp_path)])
    check_paths(_args(json=str(tmp_path / "merged.json")), inputs=[str(tmp_path)])  # a new file there is fine


@pytest.mark.parametrize("option", ["json", "html", "trace", "junit", "tb", "out"])
def test_r19_an_empty_output_name_is_refused_not_ignored(option):
    from dmlprof.output import check_paths

    with pytest.raises(UsageError, match=f"--{option} is given an empty name"):
        check_paths(_args(**{option: ""}))


# -- R24: a bare 1 is not 100 % --------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["1", "1.0", "5"])
def test_r24_a_bare_number_from_1_up_is_refused_as_ambiguous(text):
    from dmlprof.cli.check import share

    with pytest.raises(argparse.ArgumentTypeError):
        share(text)


@pytest.mark.parametrize("text, value", [("0.05", 0.05), ("0", 0.0), ("1%", 0.01), ("100%", 1.0), ("0.999", 0.999)])
def test_r24_fractions_below_1_and_percentages_are_read(text, value):
    from dmlprof.cli.check import share

    assert share(text) == pytest.approx(value)


# -- R11: a gate that cannot fail is refused -----------------------------------------------------------------
def test_r11_check_on_the_cpu_without_a_target_is_refused():
    from dmlprof.cli.check import _refuse_a_gate_that_cannot_fail

    with pytest.raises(UsageError, match="cannot fail"):
        _refuse_a_gate_that_cannot_fail(argparse.Namespace(target=None, target_torch=None, device="cpu"))
    _refuse_a_gate_that_cannot_fail(argparse.Namespace(target="dml", target_torch=None, device="cpu"))  # a prediction can fail


def test_r11_check_with_auto_on_a_machine_without_accelerator_is_refused(monkeypatch):
    from dmlprof import backends
    from dmlprof.cli.check import _refuse_a_gate_that_cannot_fail

    class Absent:
        device_type = "cuda"

        @staticmethod
        def availability():
            return backends.Availability(False, "none here")

    monkeypatch.setattr(backends, "backend_class", lambda name: Absent if name != "cpu" else
                        type("Cpu", (), {"device_type": "cpu"}))
    with pytest.raises(UsageError, match="no accelerator found"):
        _refuse_a_gate_that_cannot_fail(argparse.Namespace(target=None, target_torch=None, device="auto"))


# -- R12: a NaN loss fails the gate, and a model that fails still gets its JUnit --------------------------------
def _check_args(tmp_path, **values):
    """``check``'s arguments as its own parser gives them (every default), then ``values``."""
    from dmlprof.cli import build_parser

    (tmp_path / "m.py").write_text("def build_model(): pass\ndef make_batch(n): pass\n", encoding="utf-8")
    args = build_parser().parse_args(["check", str(tmp_path / "m.py"), "--target", "dml", "--junit",
                                      str(tmp_path / "check.xml"), "--out", str(tmp_path / "out"), "--no-progress"])
    return argparse.Namespace(**{**vars(args), **values})


def test_r12_a_nan_loss_fails_the_check_with_exit_3_and_a_junit_error(tmp_path, monkeypatch, capsys):
    from dmlprof.cli import check, scan
    from dmlprof.output import Written
    from dmlprof.errors import ModelRaisedError
    from dmlprof.report import build_report

    session = make_session([{"op": "aten::addmm", "time_ns": 5}],
                           meta={"nonfinite_loss": {"step": 2, "steps_run": 4, "value": "nan"}})
    monkeypatch.setattr(scan, "scan_and_save", lambda args: (session, build_report(session), Written()))
    with pytest.raises(ModelRaisedError, match="loss was nan") as caught:
        check.run(_check_args(tmp_path))
    assert caught.value.exit_code == 3
    suite = ET.parse(tmp_path / "check.xml").getroot().find("testsuite")
    assert suite.get("errors") == "1" and "loss was nan" in suite.find("testcase/error").get("message")


def test_r12_a_model_that_fails_still_writes_its_junit_in_error(tmp_path, monkeypatch):
    from dmlprof.cli import check, scan
    from dmlprof.errors import ModelRaisedError

    def fails(args):
        raise ModelRaisedError("step 1 raised ValueError: boom")

    monkeypatch.setattr(scan, "scan_and_save", fails)
    with pytest.raises(ModelRaisedError):
        check.run(_check_args(tmp_path))
    suite = ET.parse(tmp_path / "check.xml").getroot().find("testsuite")
    error = suite.find("testcase/error")
    assert suite.get("errors") == "1" and "boom" in error.get("message") and error.get("type") == "ModelFailed"


# -- distributed runs: a run folder read back --------------------------------------------------------------------
def _rank(rank, world_size=2, run_id="run-a", **meta):
    distributed = {"rank": rank, "local_rank": rank, "world_size": world_size, "local_world_size": world_size,
                   "node_rank": 0, "backend": "gloo", "run_id": run_id}
    return make_session([{"op": "aten::mm", "time_ns": 1_000_000}],
                        meta={"model_name": "net", "run_mode": "contract", "backend": "cpu",
                              "step_times_ms": [4.0], "distributed": distributed, **meta})


def _save_ranks(folder: Path, sessions: dict) -> Path:
    from dmlprof.distributed.env import session_path

    for rank, session in sessions.items():
        session.save(session_path(folder, rank))
    return folder


def _forge(path: Path, **distributed):
    data = json.loads(path.read_text(encoding="utf-8"))
    data["meta"]["distributed"].update(distributed)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("world_size", [10**12, "abc", -1])
def test_r5_a_forged_world_size_is_an_unreadable_rank_not_a_crash(tmp_path, world_size):
    from dmlprof.report import merged_report
    from dmlprof.render.terminal import render_text
    from dmlprof.distributed.run_dir import load_run

    _save_ranks(tmp_path, {0: _rank(0), 1: _rank(1)})
    _forge(tmp_path / "rank1.session.json", world_size=world_size)
    report = merged_report(load_run(tmp_path))
    assert report.world_size == 2 and report.ranks_found == (0,)
    assert "session unreadable" in render_text(report) and "world_size" in report.errors[0].line


def test_r5_a_rank_file_numbered_past_any_job_is_ignored_saying_so(tmp_path):
    from dmlprof.report import merged_report
    from dmlprof.distributed.run_dir import load_run

    _save_ranks(tmp_path, {0: _rank(0), 1: _rank(1)})
    (tmp_path / "rank99999999999.session.json").write_text("{}", encoding="utf-8")
    (tmp_path / "rank99999999999.error.json").write_text('{"line": "x"}', encoding="utf-8")
    report = merged_report(load_run(tmp_path))
    assert report.world_size == 2 and report.missing_ranks == ()
    assert any("rank99999999999.session.json ignored" in e.line for e in report.errors)


def test_r5_a_million_missing_ranks_print_as_one_short_line(tmp_path):
    from dmlprof.report import merged_report
    from dmlprof.render.html import render_html
    from dmlprof.render.terminal import render_text
    from dmlprof.distributed.run_dir import load_run

    _save_ranks(tmp_path, {0: _rank(0, world_size=1_000_000), 5: _rank(5, world_size=1_000_000)})
    report = merged_report(load_run(tmp_path))
    line = next(line for line in render_text(report).splitlines() if line.startswith("ranks"))
    assert "missing: 1-4, 6-999999" in line and len(line) < 200
    assert len(render_html(report)) < 100_000


# -- R6: what the merged report and the error lines print ---------------------------------------------------------
def test_r6_the_merged_report_shows_control_characters_and_forges_no_line(tmp_path):
    from dmlprof.report import merged_report
    from dmlprof.render.terminal import render_text
    from dmlprof.distributed.run_dir import load_run

    evil = "net\x1b]2;pwned\x07\nStraggler: none - forged"
    _save_ranks(tmp_path, {0: _rank(0, model_name=evil), 1: _rank(1, model_name=evil)})
    (tmp_path / "rank1.error.json").write_text(json.dumps({"line": "boom\x1b[2J\nERROR forged"}), encoding="utf-8")
    text = render_text(merged_report(load_run(tmp_path)))
    assert not [c for c in text if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
    assert "Straggler: none - forged" not in text.splitlines() and "ERROR forged" not in text.splitlines()
    assert "\\x1b]2;pwned\\x07" in text and "\\x1b[2J" in text


def test_r6_an_error_line_is_one_line_without_control_characters(capsys):
    from dmlprof.cli import error_line

    error_line("cannot read m\x1b[2J.py\nforged: line", kept="session saved to r\x07.json")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err and "\\x1b[2J" in err


# -- R23: every HTML document dmlprof writes forbids loading anything ------------------------------------------
def test_r23_the_merged_run_page_has_the_same_content_security_policy_as_a_report(tmp_path):
    from dmlprof.report import merged_report
    from dmlprof.render.html import render_html
    from dmlprof.distributed.run_dir import load_run
    from dmlprof.render.html import render_html as render_report

    page = render_html(merged_report(load_run(_save_ranks(tmp_path, {0: _rank(0), 1: _rank(1)}))))
    policy = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';'
    assert policy in page and policy in render_report(_rank(0))
    assert page.index(policy) < page.index("<title>")


# -- R16: sessions of two runs are not merged as one ---------------------------------------------------------------
def test_r16_a_rank_session_of_another_run_is_left_out_saying_so(tmp_path):
    from dmlprof.report import merged_report
    from dmlprof.distributed.run_dir import load_run

    _save_ranks(tmp_path, {0: _rank(0, world_size=3), 1: _rank(1, world_size=3), 2: _rank(2, 3, run_id="run-b")})
    report = merged_report(load_run(tmp_path))
    assert report.ranks_found == (0, 1) and report.missing_ranks == (2,)
    assert "another run (run id run-b" in report.errors[0].line


def test_r16_every_rank_of_a_job_carries_one_run_id():
    from dmlprof.distributed import env

    job = {"RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "abc"}
    assert env.rank_info(job).run_id == env.rank_info(dict(job, RANK="1")).run_id
    assert env.rank_info(job).run_id != env.rank_info(dict(job, TORCHELASTIC_RUN_ID="def")).run_id
    assert env.rank_info(dict(job, **{env.RUN_ID_ENV: "u-1"})).run_id == "u-1"
    assert "run_id" in env.rank_info(job).as_meta()


# -- R7: nothing of a distributed run is written through someone else's name -------------------------------------
@pytest.mark.skipif(not POSIX, reason="symlinks need privileges on Windows")
def test_r7_the_rank_trace_is_not_written_through_a_symlink_at_its_temp_name(tmp_path):
    from dmlprof.distributed.trace import write_rank_trace

    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    folder = tmp_path / "traces" / "run"
    folder.mkdir(parents=True)
    session = _rank(1, started_at="2026-12-01T08:06:01")
    from dmlprof.render.trace import _timestamp_ms

    planted = folder / f"rank1.{_timestamp_ms(session.meta)}.pt.trace.json.tmp"  # the name the old code used
    planted.symlink_to(victim)
    path = write_rank_trace(session, tmp_path / "traces", "run")
    assert victim.read_text(encoding="utf-8") == "precious"
    assert json.loads(path.read_text(encoding="utf-8"))["distributedInfo"]["rank"] == 1


@pytest.mark.skipif(not POSIX, reason="symlinks need privileges on Windows")
def test_r7_error_lines_heartbeats_and_the_profiler_trace_do_not_follow_symlinks(tmp_path):
    from dmlprof.distributed.annotate import export_profiler_trace, profiler_trace_path
    from dmlprof.job.rank import write_error
    from dmlprof.distributed.watchdog import Watchdog, progress_path
    from dmlprof.meta import Distributed

    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    run = tmp_path / "run"
    (run / ".progress").mkdir(parents=True)
    (run / "profiler").mkdir()
    (run / "rank0.error.json").symlink_to(victim)
    progress_path(run, 0).with_name(f"rank0.json.{__import__('os').getpid()}.tmp").symlink_to(victim)
    profiler_trace_path(run, 0).symlink_to(victim)

    class Profile:
        def export_chrome_trace(self, path):
            Path(path).write_text('{"traceEvents": []}', encoding="utf-8")

    assert write_error(run, 0, "rank 0: boom", 3)
    Watchdog(run, 0, 2, 5, current=lambda: None, on_hang=lambda line: None)._write()
    export_profiler_trace(Profile(), run, Distributed(rank=0, world_size=2, backend="gloo"))
    assert victim.read_text(encoding="utf-8") == "precious"
    assert json.loads((run / "rank0.error.json").read_text(encoding="utf-8"))["line"] == "rank 0: boom"
    assert json.loads(profiler_trace_path(run, 0).read_text(encoding="utf-8"))["distributedInfo"]["rank"] == 0


@pytest.mark.skipif(not POSIX, reason="symlinks need privileges on Windows")
def test_r7_a_shared_run_folder_that_is_a_symlink_is_refused(tmp_path):
    from dmlprof.files import own_dir

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError):
        own_dir(tmp_path / "run")
    assert own_dir(tmp_path / "mine").is_dir() and own_dir(tmp_path / "mine").is_dir()  # its own: reused


# -- R2, R7: each --nproc run gets a folder nobody held -----------------------------------------------------------
def test_r2_two_launches_in_the_same_second_get_a_folder_each_and_none_made_by_someone_else(tmp_path, monkeypatch):
    import datetime as dt

    from dmlprof.job import launch

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime(2026, 12, 1, 8, 6, 1)

    folders = []
    monkeypatch.setattr(launch._dt, "datetime", Frozen)
    monkeypatch.setattr(launch, "_backend_name", lambda device: "cpu")
    monkeypatch.setattr(launch, "_run_torchrun", lambda args, folder: folders.append(folder) or {})
    monkeypatch.setattr("dmlprof.job.report.print_run", lambda folder, args: None)
    (tmp_path / "m.py").write_text("import torch\nprint(1)\n", encoding="utf-8")
    taken = tmp_path / "out" / "m-cpu-2ranks-20261201T080601"
    taken.mkdir(parents=True)  # someone else's, made first
    args = argparse.Namespace(model=str(tmp_path / "m.py"), nproc=2, target=None, replace=False, verify=False,
                              trace=None, device="cpu", out=str(tmp_path / "out"), json=None, html=None, junit=None,
                              tb=None)
    launch.launch(args)
    launch.launch(args)
    assert [f.name for f in folders] == ["m-cpu-2ranks-20261201T080601-2", "m-cpu-2ranks-20261201T080601-3"]


# -- R13, R14: the distributed options' values ----------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--nproc", "100000"], ["--nproc", "0"], ["--comm-timeout", "nan"],
                                  ["--comm-timeout", "0"], ["--comm-timeout", "-5"], ["--comm-timeout", "inf"]])
def test_r13_r14_out_of_range_distributed_options_are_usage_errors(argv, capsys):
    from dmlprof.cli import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["scan", "m.py", *argv])
    assert exited.value.code == 2 and capsys.readouterr().err.startswith("dmlprof: error:")


# -- R15: a run folder that cannot be written is the run's one error, exit 2 --------------------------------------
def test_r15_ranks_that_could_not_write_even_their_error_line_make_one_output_error(tmp_path, monkeypatch):
    import errno

    from dmlprof import files
    from dmlprof.job.launch import failure_line

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "write_new", full)
    line, code = failure_line(tmp_path, 2, {0: 2, 1: 2})
    assert code == 2 and "cannot write in the run folder" in line and "No space left on device" in line


def test_r15_a_rank_whose_session_could_not_be_written_ends_the_run_with_its_exit_code(tmp_path):
    from dmlprof.job.launch import failure_line
    from dmlprof.job.rank import write_error

    write_error(tmp_path, 0, "cannot write the session under run: File too large", 2)
    write_error(tmp_path, 1, "stopped by the launcher (SIGTERM)", 130)
    line, code = failure_line(tmp_path, 2, {0: 2, 1: 130})
    assert code == 2 and line.startswith("rank 0: cannot write the session")


# -- R17: a run folder's traces ---------------------------------------------------------------------------------
def test_r17_report_of_a_run_folder_writes_each_ranks_trace_with_tb_and_refuses_trace(tmp_path, capsys):
    from dmlprof.cli import main

    folder = _save_ranks(tmp_path / "run", {0: _rank(0), 1: _rank(1)})
    assert main(["report", str(folder), "--tb", str(tmp_path / "tb"), "--quiet"]) == 0
    assert sorted(p.name.split(".")[0] for p in (tmp_path / "tb" / "run").glob("*.pt.trace.json")) == ["rank0", "rank1"]
    assert main(["report", str(folder), "--trace", str(tmp_path / "t.json")]) == 2
    assert "--tb DIR" in capsys.readouterr().err and not (tmp_path / "t.json").exists()


# -- R18: a report on standard output is alone there -------------------------------------------------------------
def test_r18_what_the_code_prints_goes_to_stderr_while_a_report_goes_to_stdout(tmp_path):
    import subprocess

    code = ("import argparse, os, sys\n"
            "from dmlprof.output import script_output_to_stderr\n"
            "with script_output_to_stderr(argparse.Namespace(json='-')):\n"
            "    print('from the script'); os.system('echo from a subprocess')\n"
            "print('the report')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(__import__("os").environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
    assert done.stdout == "the report\n"
    assert "from the script" in done.stderr and "from a subprocess" in done.stderr


def test_r18_a_merged_report_on_standard_output_is_not_followed_by_the_text_report(tmp_path, capsys):
    from dmlprof.cli import main

    folder = _save_ranks(tmp_path / "run", {0: _rank(0), 1: _rank(1)})
    assert main(["report", str(folder), "--json", "-"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["world_size"] == 2 and "run saved to" in out.err


# -- R20, R21: what a session may hold --------------------------------------------------------------------------
def _session_file(tmp_path, session) -> Path:
    path = tmp_path / "s.session.json"
    path.write_text(json.dumps(session.to_dict()), encoding="utf-8")
    return path


def test_r20_a_session_with_a_string_longer_than_any_name_is_refused_in_one_line(tmp_path):
    from dmlprof.errors import SessionFileError
    from dmlprof.session import Session
    from dmlprof.session_check import MAX_TEXT_CHARS

    data = make_session([{"op": "aten::mm", "time_ns": 5}]).to_dict()
    data["ops"]["shapes"] = ["[" * (MAX_TEXT_CHARS + 1)]
    path = tmp_path / "s.session.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SessionFileError, match=r"ops\.shapes\[0\] is 65,537 characters long"):
        Session.load(path)
    data = make_session([{"op": "aten::mm", "time_ns": 5}]).to_dict()
    data["ops"]["module"] = ["M" * 100_000_000]  # the probe's 100 MB module name
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SessionFileError, match=r"ops\.module\[0\] is 100,000,000 characters long"):
        Session.load(path)


def test_r20_a_long_string_dmlprof_records_is_cut_on_save_and_loads_again(tmp_path):
    from dmlprof.render.html import render_html
    from dmlprof.session import Session
    from dmlprof.session_check import MAX_NAME_CHARS, MAX_TEXT_CHARS

    long_name = "block." * 2_000_000  # 12 MB
    session = make_session([{"op": "aten::mm", "time_ns": 5, "module": long_name}],
                           meta={"partial_reason": "ValueError: " + "x" * 200_000})
    path = tmp_path / "s.session.json"
    session.save(path)
    loaded = Session.load(path)
    assert len(loaded.ops["module"][0]) == MAX_NAME_CHARS and loaded.ops["module"][0].endswith("...")
    assert len(loaded.meta.partial_reason) == MAX_TEXT_CHARS
    # a dotted name has a module-tree row per parent: 683 rows here, a few MB, never the 12 MB name squared
    assert path.stat().st_size < 1_000_000 and len(render_html(loaded)) < 8_000_000


@pytest.mark.parametrize("key, value", [("step_times_ms", [1e308]), ("step_times_ms", [-5.0]),
                                        ("recorded_step_times_ms", [1e300]), ("duration_s", -1)])
def test_r21_step_times_that_are_no_time_are_refused(tmp_path, key, value):
    from dmlprof.errors import SessionFileError
    from dmlprof.session import Session

    data = make_session([{"op": "aten::mm", "time_ns": 5}]).to_dict()
    data["meta"][key] = value
    path = tmp_path / "s.session.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SessionFileError, match=key):
        Session.load(path)


def test_r21_negative_call_times_and_collective_times_are_refused(tmp_path):
    from dmlprof.errors import SessionFileError
    from dmlprof.session import Session

    data = make_session([{"op": "aten::mm", "time_ns": 5}]).to_dict()
    data["ops"]["time_ns"] = [-5]
    path = tmp_path / "s.session.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SessionFileError, match="time_ns"):
        Session.load(path)
    data = make_session([{"op": "aten::mm", "time_ns": 5}]).to_dict()
    data["extras"]["collectives"] = {"op": ["c10d::allreduce_"], "comm_time_ns": [-1], "step": [0]}
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SessionFileError, match="collectives.comm_time_ns"):
        Session.load(path)


# -- R1: what a recording can cost is bounded, and the session says what it left out -----------------------------
STEPLESS = """\
import torch
x = torch.zeros(1)
for _ in range({calls}):
    x.add_(1)
"""


def test_r1_a_full_recorder_keeps_its_first_calls_and_runs_the_rest_unrecorded():
    import torch

    from dmlprof.backends import resolve_backend
    from dmlprof.record.recorder import Recorder
    from dmlprof.record.window import _set_recording

    recorder = Recorder(resolve_backend("cpu"), sync=False)
    recorder.max_calls, seen = 50, []
    recorder.when_rows_reach(20, lambda: seen.append(len(recorder.rows)))
    recorder._arm()
    x = torch.zeros(1)
    with recorder:
        for _ in range(120):
            x.add_(1)
        assert len(recorder.rows) == 50 and recorder.full and recorder.filled_at == [50] and seen == [20]
        recorder.drop_rows()  # a script's warm-up ends: the recorder records again, its caps armed again
        _set_recording(recorder, True)  # as the step window does then
        x.add_(1)
        assert len(recorder.rows) == 1 and not recorder.full
    assert float(x) == 121  # every call ran, recorded or not


def test_r1_a_stepless_script_past_both_caps_is_saved_with_what_was_left_out(tmp_path, monkeypatch):
    from dmlprof import runner
    from dmlprof.record import recorder as recorder_module
    from dmlprof.runner import run as run_module
    from dmlprof.session import Session

    monkeypatch.setattr(recorder_module, "MAX_RECORDED_CALLS", 300)
    monkeypatch.setattr(run_module, "PROFILED_CALLS_MAX", 40)
    script = tmp_path / "loop.py"
    script.write_text(STEPLESS.format(calls=1_000), encoding="utf-8")
    session = runner.scan(script, "cpu", profiler=True)
    assert len(session.ops) == 300 and not session.meta.partial
    notes = " ".join(session.meta.notes)
    assert "holds the first 300 calls" in notes and "ran unrecorded" in notes
    assert "first 40 recorded calls only" in notes
    assert session.meta.to_dict()["profiler_check"]["matched_ops"] >= 1
    # a ratio was formed from the profiled calls (its size is two clocks' and the machine's load: 14.8 once in CI)
    assert (session.meta.to_dict()["profiler_check"]["ratio"] or 0) > 0
    path = session.save(tmp_path / "s.session.json")
    assert len(Session.load(path).ops) == 300


# -- R25: a script's own torch.profiler runs as it would without dmlprof ---------------------------------------
OWN_PROFILER = """\
import sys, torch
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.profiler.profile() as prof:
    for i in range(6):
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
open(sys.argv[1], "w").write(str(len(prof.key_averages())))
"""


@pytest.mark.parametrize("run_to_end", [True, False])
def test_r25_a_script_running_torch_profiler_itself_keeps_its_profile(tmp_path, run_to_end):
    from dmlprof import runner

    script = tmp_path / "own.py"
    script.write_text(OWN_PROFILER, encoding="utf-8")
    counted = tmp_path / "events.txt"
    session = runner.scan(script, "cpu", profiler=True, script_args=[str(counted)], run_to_end=run_to_end)
    assert len(session.ops) > 0 and not session.meta.partial
    assert "started torch.profiler itself" in " ".join(session.meta.notes)
    if run_to_end:  # the script ran to its end: its profiler's table holds what it profiled
        assert int(counted.read_text(encoding="utf-8")) > 0


# -- R9: the streams dmlprof reports on are the ones it was started with ------------------------------------------
def test_r9_a_script_that_replaces_sys_stdout_gets_its_own_back_only_while_it_runs(tmp_path):
    from dmlprof import runner

    script = tmp_path / "logs.py"
    script.write_text("import sys, torch\nsys.stdout = open(sys.argv[1], 'w')\nsys.stderr = sys.stdout\n"
                      "print(torch.ones(2).sum().item())\nsys.stdout.close()\n", encoding="utf-8")
    before = sys.stdout, sys.stderr
    runner.scan(script, "cpu", profiler=False, script_args=[str(tmp_path / "log.txt")])
    assert (sys.stdout, sys.stderr) == before
    assert (tmp_path / "log.txt").read_text(encoding="utf-8").strip() == "2.0"


def test_r9_a_closed_stream_is_opened_again_on_its_descriptor():
    import io

    from dmlprof.runner.user_code import open_again

    closed = io.StringIO()
    closed.close()
    again = open_again(closed, 2)
    assert not again.closed and again.fileno() == 2


# -- R22: a training thread stopped at the end of the window dies quietly ----------------------------------------
def test_r22_window_closed_ends_a_thread_without_a_traceback():
    import subprocess

    code = ("import threading\n"
            "from dmlprof.record.window import StepWindow, WindowClosed\n"
            "StepWindow(1, 1)\n"
            "def train(): raise WindowClosed()\n"
            "def fails(): raise ValueError('the script own error')\n"
            "for target in (train, fails):\n"
            "    thread = threading.Thread(target=target); thread.start(); thread.join()\n"
            "print('main ran on')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(__import__("os").environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
    assert done.stdout == "main ran on\n" and "WindowClosed" not in done.stderr
    assert "ValueError: the script own error" in done.stderr  # the script's own errors still show


# -- R8: SIGTERM and SIGHUP take the one save path ----------------------------------------------------------------
@pytest.fixture
def stop_signals_as(request):
    """Set SIGTERM and SIGHUP to a disposition for the test (whatever the runner inherited), then put them back."""
    import signal

    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGHUP)}

    def set_to(disposition):
        for number in saved:
            signal.signal(number, disposition)

    yield set_to
    for number, handler in saved.items():
        signal.signal(number, handler)


@pytest.mark.skipif(not POSIX, reason="POSIX signals")
def test_r8_sigterm_is_a_stop_with_its_own_exit_status_and_waits_while_saving(stop_signals_as):
    import os
    import signal

    from dmlprof import interrupts

    stop_signals_as(signal.SIG_DFL)
    with interrupts.stopping():
        with pytest.raises(interrupts.Stopped) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                __import__("time").sleep(0.001)
        assert interrupts.exit_code(caught.value) == 143
        assert interrupts.cause_of(caught.value).one_line() == "stopped by SIGTERM"
        assert interrupts.cause_of(caught.value).exit_code == 143
        with interrupts.saving():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGHUP)
            __import__("time").sleep(0.05)  # deferred: nothing raised here
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.skipif(not POSIX, reason="POSIX signals")
def test_a_signal_the_process_was_started_ignoring_stays_ignored_as_nohup_asked(stop_signals_as):
    # nohup ignores SIGHUP so that a closed terminal does not end the program: neither the scan (stopping, saving)
    # nor its supervisor (which would pass it on to the child) may take it back; a signal with its default
    # disposition is still theirs
    import os
    import signal
    import subprocess

    from dmlprof import interrupts, survival

    stop_signals_as(signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with interrupts.stopping():
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing raised
        __import__("time").sleep(0.05)
        with interrupts.saving():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with survival._passing_signals_to(child):
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, signal.SIG_DFL)
    finally:
        child.kill()
        child.wait()
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_r17_a_rank_of_a_bare_torchrun_job_refuses_trace_rather_than_ignore_it(monkeypatch):
    from dmlprof.distributed import env
    from dmlprof.job.rank import run_rank

    args = argparse.Namespace(model="m.py", target=None, replace=False, verify=False, trace="t.json")
    with pytest.raises(UsageError, match="--trace does not combine"):
        run_rank(args, env.RankInfo(0, 0, 2, 2))


def test_r19_view_of_an_empty_folder_name_is_refused_not_the_working_directory(capsys):
    from dmlprof.cli import main

    assert main(["view", ""]) == 2
    assert "empty name" in capsys.readouterr().err


def test_r13_family_a_sweep_over_more_devices_than_processes_can_run_at_once_is_refused(tmp_path):
    from dmlprof.distributed.env import MAX_LOCAL_RANKS
    from dmlprof.sweep.driver import run_sweep_devices

    started = []
    with pytest.raises(UsageError, match="at most"):
        run_sweep_devices(tmp_path / "m.py", "cpu", list(range(MAX_LOCAL_RANKS + 1)), batch_sizes=[1],
                          runner=lambda *a, **k: started.append(a))
    assert started == []


def test_a_sparse_calls_tensors_are_recorded_with_their_dense_size_not_an_error():
    """``Tensor.nbytes`` (read for every recorded tensor) raises for a sparse tensor: its size is numel's."""
    import torch

    from dmlprof.backends import resolve_backend
    from dmlprof.record.recorder import Recorder

    recorder = Recorder(resolve_backend("cpu"), sync=False)
    with recorder:
        dense = torch.ones(3, 4).to_sparse().to_dense()
    assert dense.sum().item() == 12
    sparse_rows = [row for row in recorder.rows if any(meta[2] == (3, 4) for meta in row[3] + row[4])]
    assert sparse_rows and all(meta[3] == 48 for row in sparse_rows for meta in row[3] + row[4] if meta[2] == (3, 4))
