"""Distributed runs without running one: the merge over synthetic rank sessions, the collectives join,
the environment, the watchdog's verdicts, the one failure line, the merged renderers."""
from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from dmlprof.analysis import distributed as merge
from dmlprof.distributed import env
from dmlprof.record.collectives import (collective_of, collectives_frame, comm_phase, payload_bytes)
from dmlprof.job.launch import failure_line, rank_argv
from dmlprof.render.html import render_html
from dmlprof.render.json_report import render_json
from dmlprof.render.terminal import render_text
from dmlprof.report import merged_report
from dmlprof.distributed.run_dir import load_run
from dmlprof.distributed.watchdog import Progress, Watchdog, blame
from dmlprof.errors import SessionFileError, UsageError
from session_factory import HOSTILE, make_session
from session_kinds import job_run, rank_session



class _Op:
    """Stands for an OpOverload: what comm_phase reads."""

    def __init__(self, qualified):
        self.namespace = qualified.split("::")[0]
        self._schema = type("S", (), {"name": qualified})()


def test_collectives_are_the_comm_phase_and_only_they():
    assert comm_phase(_Op("c10d::allreduce_")) == "comm"
    assert comm_phase(_Op("_c10d_functional::all_reduce")) == "comm"
    assert comm_phase(_Op("_c10d_functional::_wrap_tensor_autograd")) is None
    assert comm_phase(_Op("aten::add")) is None


def test_collective_names_and_payload_bytes():
    assert collective_of("c10d::allreduce_") == collective_of("_c10d_functional::all_reduce") == "all_reduce"
    assert collective_of("c10d::_allgather_base_") == "all_gather"
    # all-reduce of two float32 buffers: both; all_gather_into_tensor (output, input): the input only
    assert payload_bytes("c10d::allreduce_", "[[10], [2, 3]]", "float32") == 4 * 16
    assert payload_bytes("c10d::_allgather_base_", "[[8], [4]]", "float16") == 2 * 4
    assert payload_bytes("c10d::barrier", "[]", "") == 0


def test_collectives_join_the_backends_ranges_in_order_on_our_clock():
    session = make_session([
        {"op": "c10d::allreduce_", "phase": "comm", "time_ns": 1_000, "start_ns": 10_000},
        {"op": "aten::mm", "time_ns": 5_000},
        {"op": "c10d::allreduce_", "phase": "comm", "time_ns": 2_000, "start_ns": 90_000},
    ])
    # the profiler's clock is offset; each call shows twice (outer, inner), gloo's ranges on another thread
    events = pd.DataFrame([
        ("c10d::allreduce_", 5_000_000, 1_500, "", "", 1), ("c10d::allreduce_", 5_000_100, 1_000, "c10d::allreduce_", "", 1),
        ("gloo:all_reduce", 5_000_600, 7_000, "", "", 2),
        ("c10d::allreduce_", 5_080_000, 2_500, "", "", 1), ("c10d::allreduce_", 5_080_100, 2_000, "c10d::allreduce_", "", 1),
        ("gloo:all_reduce", 5_081_000, 9_000, "", "", 3),
    ], columns=["name", "start_ns", "time_ns", "parent", "grandparent", "thread"]).assign(device_time_ns=0, self_device_time_ns=0)
    frame = collectives_frame(session.ops, events)
    assert list(frame["comm_time_ns"]) == [7_000, 9_000]
    assert list(frame["comm_start_ns"]) == [10_500, 90_900]  # call start + (range start - inner call start)
    assert list(frame["comm_source"]) == ["backend range"] * 2
    assert list(frame["seq"]) == [0, 2]


def test_ranges_of_unrecorded_calls_are_skipped():
    # a script's set-up and warm-up all-reduces were recorded, then dropped (or never recorded):
    # their ranges are not the kept call's
    session = make_session([{"op": "c10d::allreduce_", "phase": "comm", "time_ns": 1_000, "start_ns": 0}])
    events = pd.DataFrame([
        ("c10d::allreduce_", 100, 500, "", "", 1), ("gloo:all_reduce", 300, 30_000, "", "", 2),
        ("c10d::allreduce_", 1_000, 500, "", "", 1), ("c10d::allreduce_", 1_100, 300, "c10d::allreduce_", "", 1),
        ("gloo:all_reduce", 1_200, 50_000, "", "", 2),
        ("c10d::allreduce_", 90_000, 1_500, "", "", 1), ("c10d::allreduce_", 90_100, 1_000, "c10d::allreduce_", "", 1),
        ("gloo:all_reduce", 90_700, 7_000, "", "", 2),
    ], columns=["name", "start_ns", "time_ns", "parent", "grandparent", "thread"]).assign(device_time_ns=0, self_device_time_ns=0)
    assert list(collectives_frame(session.ops, events)["comm_time_ns"]) == [7_000]


def test_without_profiler_events_a_collective_has_no_time_of_its_own():
    session = make_session([{"op": "c10d::broadcast_", "phase": "comm", "time_ns": 1_000}])
    frame = collectives_frame(session.ops, None)
    assert frame["comm_time_ns"].isna().all() and list(frame["call_time_ns"]) == [1_000]


def test_script_steps_run_from_one_optimizer_step_end_to_the_next():
    ops = pd.DataFrame({"rank": 0, "step": [0, 0, 1, 1, 2, 2], "phase": ["forward", "optimizer"] * 3,
                        "start_ns": [0, 10, 20, 60, 80, 130], "time_ns": [5, 5, 5, 5, 5, 5]})
    steps = merge.script_step_times(ops)
    assert list(steps["step"]) == [1, 2] and list(steps["step_ms"] * 1e6) == [50, 70]


def test_merge_names_the_straggler_and_why(tmp_path):
    # GIVEN rank 1 spends 12 ms per step in a fallback rank 0 does not have; rank 0 waits in its all-reduce
    run = job_run(tmp_path, {0: rank_session(0, comm_ms=17.0), 1: rank_session(1, fallback_ms=12.0, comm_ms=5.0)})
    report = merged_report(run)
    straggler = report.straggler
    assert straggler.rank == 1
    assert straggler.fallback_excess_ms == pytest.approx(12.0)
    assert straggler.others_comm_excess_ms == pytest.approx(12.0)
    assert straggler.ops[0].op == "aten::native_group_norm_backward"
    text = render_text(report)
    assert "Straggler: rank 1, busy 12.0 ms longer" in text and "12.0 ms in calls that fell back to the CPU" in text
    # and the fallback is a verdict rank 0 never had
    differences = {d.op: d.by_rank for d in report.verdict_differences}
    assert differences == {"aten::native_group_norm_backward": {0: {}, 1: {"fallback": 1.0}}}
    assert "never called" in text


def test_ranks_within_noise_have_no_straggler(tmp_path):
    run = job_run(tmp_path, {0: rank_session(0), 1: rank_session(1, compute_ms=10.5)})
    report = merged_report(run)
    assert report.straggler.rank is None and report.verdict_differences == ()
    assert "Straggler: none." in render_text(report)


def test_per_rank_split_adds_up_to_the_step(tmp_path):
    run = job_run(tmp_path, {0: rank_session(0, fallback_ms=2.0), 1: rank_session(1)})
    ranks = {r.rank: r for r in merged_report(run).ranks}
    zero = ranks[0]
    assert zero.step_ms == 40.0 and zero.compute_ms == 10.0 and zero.fallback_ms == 2.0
    assert zero.comm_call_ms == pytest.approx(0.1) and zero.comm_ms == 5.0
    assert zero.other_ms == pytest.approx(40.0 - 10.0 - 2.0 - 0.1)
    assert zero.comm_calls == 1 and zero.comm_bytes == 4000 and zero.comm_share == pytest.approx(5 / 40)
    # the bar of where the step went is the report's: each part's share of the median step
    assert [(p.part, round(p.share, 4)) for p in zero.step_parts] == [
        ("compute", 0.25), ("fallback", 0.05), ("comm call", 0.0025), ("other", 0.6975)]


def test_a_missing_rank_and_its_error_line_are_reported(tmp_path):
    run = job_run(tmp_path, {0: rank_session(0)}, errors=[(1, "died (killed by SIGKILL)")])
    report = merged_report(run)
    assert report.missing_ranks == (1,) and report.world_size == 2
    assert "RANK FAILED  rank 1: died (killed by SIGKILL)" in render_text(report)


def test_a_folder_without_sessions_is_one_error(tmp_path):
    with pytest.raises(SessionFileError, match="holds no readable rank session"):
        load_run(tmp_path)


def test_renderers_escape_what_the_run_named(tmp_path):
    hostile = rank_session(1, op=HOSTILE)
    report = merged_report(job_run(tmp_path, {0: rank_session(0), 1: hostile}, errors=[(1, HOSTILE)]))
    page = render_html(report)
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert json.loads(render_json(report))["verdict_differences"][0]["op"] in (HOSTILE, "aten::mm")


def test_rank_info_reads_the_launchers_environment():
    environ = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}
    info = env.rank_info(environ)
    assert info == env.RankInfo(3, 1, 4, 2, 1, run_id=env.job_token(environ))
    assert env.rank_info({}) is None
    with pytest.raises(UsageError):
        env.rank_info({"RANK": "4", "WORLD_SIZE": "4"})


def test_all_ranks_of_a_job_agree_on_the_run_folder_and_other_jobs_do_not():
    agent = "/tmp/torchelastic_ab12/none_xy/attempt_0/{}/error.json"
    rank0 = {"TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_ERROR_FILE": agent.format(0)}
    rank1 = {"TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_ERROR_FILE": agent.format(1)}
    other = {"TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_ERROR_FILE": agent.replace("ab12", "cd34").format(0)}
    assert env.job_token(rank0) == env.job_token(rank1) != env.job_token(other)
    assert env.job_token({"TORCHELASTIC_RUN_ID": "job-7"}) == env.job_token({"TORCHELASTIC_RUN_ID": "job-7", "RANK": "1"})


def test_blame_names_the_rank_that_never_reached_the_collective():
    me = Progress(rank=0, pid=1, collectives=8, last_op="c10d::allreduce_")
    behind = Progress(rank=1, pid=1, collectives=7, last_op="aten::add_.Tensor", step=1, idle_s=9.0)
    culprits, why = blame(me, {1: behind})
    assert culprits == [1] and why.startswith("rank 1 issued 7 collectives; its last call aten::add_.Tensor at step 1")
    assert blame(me, {1: None}) == ([1], "rank 1 never reported progress")
    assert blame(me, {1: Progress(rank=1, pid=1, collectives=8)}) == ([], "")


class _FakeRecorder:
    def __init__(self, rows):
        self.rows, self.drops = rows, 0

    def drop_rows(self, kept_after):
        self.rows, self.drops = list(kept_after), self.drops + 1


def test_the_watchdog_fires_only_when_stalled_at_a_collective(tmp_path):
    fired = []
    rows = [(0, "forward", "aten::mm"), (0, "comm", "c10d::allreduce_")]
    recorder = _FakeRecorder(rows[:1])
    dog = Watchdog(tmp_path, 0, 2, timeout_s=5, current=lambda: recorder, on_hang=fired.append)
    start = time.monotonic()
    assert not dog.check(start + 10)  # stalled, but not at a collective
    recorder.rows = rows
    assert not dog.check(start + 11)  # a collective just started
    assert dog.check(start + 17) and len(fired) == 1
    # no heartbeat from rank 1 at all: it is the one named
    assert fired[0].startswith("rank 1 never reached collective #1 (c10d::allreduce_, step 0): rank 0 waited 6 s there")
    heartbeat = Progress.read(tmp_path / ".progress" / "rank0.json")
    assert heartbeat.collectives == 1 and heartbeat.calls == 2


def test_the_heartbeat_counts_the_collectives_kept_after_a_warm_up_drop(tmp_path):
    recorder = _FakeRecorder([(0, "comm", "c10d::broadcast_"), (0, "comm", "c10d::allreduce_"), (0, "forward", "aten::mm")])
    dog = Watchdog(tmp_path, 0, 2, timeout_s=5, current=lambda: recorder, on_hang=lambda line: None)
    dog.check(time.monotonic())
    assert dog.progress.collectives == 2
    recorder.drop_rows([(0, "forward", "aten::mm")])  # the script's warm-up rows were dropped; recording goes on
    dog.check(time.monotonic())
    assert dog.progress.collectives == 0


def test_a_drop_is_seen_even_when_the_rows_grew_past_the_old_count_between_two_looks(tmp_path):
    # a loaded machine: the watchdog's next look comes after more calls than the warm-up held
    recorder = _FakeRecorder([(0, "comm", "c10d::broadcast_"), (0, "comm", "c10d::allreduce_")])
    dog = Watchdog(tmp_path, 0, 2, timeout_s=5, current=lambda: recorder, on_hang=lambda line: None)
    dog.check(time.monotonic())
    assert dog.progress.collectives == 2
    recorder.drop_rows([(1, "forward", "aten::mm"), (1, "comm", "c10d::allreduce_"), (1, "forward", "aten::mm")])
    dog.check(time.monotonic())
    assert dog.progress.collectives == 1 and dog.progress.calls == 2 + 3


def test_failure_line_blames_the_dead_rank_first_and_lists_what_was_kept(tmp_path):
    make_session([{"op": "aten::mm", "time_ns": 1}]).save(env.session_path(tmp_path, 0))
    (tmp_path / "rank0.error.json").write_text(json.dumps({"rank": 0, "line": "stopped by the launcher (SIGTERM)"}))
    line, code = failure_line(tmp_path, 2, {1: -9, 0: 130})
    assert code == 3 and line.startswith("rank 1 died (killed by SIGKILL); sessions of rank 0 kept in ")
    assert json.loads((tmp_path / "rank1.error.json").read_text())["line"] == "died (killed by SIGKILL)"


def test_failure_line_blames_the_killed_rank_not_one_the_launcher_stopped_before_it_wrote_a_line(tmp_path):
    # rank 1 was killed; the launcher's SIGTERM ended rank 0 before it could write its line
    line, code = failure_line(tmp_path, 2, {0: -15, 1: -9})
    assert line.startswith("rank 1 died (killed by SIGKILL)"), line


def test_failure_line_puts_a_hang_before_the_ranks_the_launcher_stopped(tmp_path):
    (tmp_path / "rank0.error.json").write_text(json.dumps({"rank": 0, "line": "rank 0 waited 8 s ...", "hung": True}))
    (tmp_path / "rank1.error.json").write_text(json.dumps({"rank": 1, "line": "stopped by the launcher (SIGTERM)"}))
    line, code = failure_line(tmp_path, 2, {0: 5, 1: 130})
    assert line.startswith("rank 0 waited 8 s ...; no session kept") and code == 3  # a hang is the model's failure


def test_each_rank_gets_the_scan_options_but_not_the_launch_ones():
    import argparse

    args = argparse.Namespace(model="m.py", device="cpu", batch_size=8, steps=3, warmup=None, comm_timeout=30.0,
                              dist_backend=None, sync=False, profiler=True, tb=None, script_args=["--epochs", "1"])
    assert rank_argv(args) == ["scan", "m.py", "--device", "cpu", "--batch-size", "8", "--steps", "3",
                               "--comm-timeout", "30.0", "--no-sync", "--quiet", "--", "--epochs", "1"]


def test_sweep_devices_run_at_once(tmp_path):
    from dmlprof.sweep.driver import run_sweep_devices

    model = tmp_path / "m.py"
    model.write_text("def build_model(): pass\ndef make_batch(n): pass\n")
    spans = []

    def runner(argv, size, timeout_s, tick=None):
        started = time.monotonic()
        time.sleep(0.3)
        spans.append((int(argv[argv.index("--device-index") + 1]), started, time.monotonic()))
        return {"batch_size": size, "status": "ok", "samples_per_s": 1.0, "step_ms_p50": 1.0, "step_ms_p95": 1.0,
                "peak_memory_bytes": 1, "memory_source": "", "fallback_time_share": 0.0, "error": None}

    results = run_sweep_devices(model, "cpu", [0, 1], batch_sizes=[1, 2], runner=runner)
    assert [r.settings.device_index for r in results] == [0, 1]
    assert [len(r.results) for r in results] == [2, 2]
    first = {d: min(s for i, s, _ in spans if i == d) for d in (0, 1)}
    last = {d: max(e for i, _, e in spans if i == d) for d in (0, 1)}
    assert first[1] < last[0] and first[0] < last[1]  # the two devices' children overlapped
    with pytest.raises(UsageError):
        run_sweep_devices(model, "cpu", [0, 0], batch_sizes=[1], runner=runner)


def test_rank_traces_name_their_rank_as_holistic_trace_analysis_looks_for_it(tmp_path):
    import re

    from dmlprof.distributed.trace import write_rank_trace

    session = rank_session(1)
    path = write_rank_trace(session, tmp_path, "run")
    text = path.read_text(encoding="utf-8")
    # HTA 0.5 (hta/common/trace_file.py) reads a file's rank as the first match of this pattern
    assert re.search(r'"rank":\s+(\d+)', text).group(1) == "1"
    trace = json.loads(text)
    assert trace["distributedInfo"] == {"backend": "gloo", "rank": 1, "world_size": 2}
    assert path.name.startswith("rank1.") and path.name.endswith(".pt.trace.json")


@pytest.mark.parametrize("option", ["target", "replace", "verify", "trace"])
def test_a_job_refuses_the_options_of_a_single_scan(option):
    from argparse import Namespace

    from dmlprof.job import refuse_single_scan_options

    args = Namespace(**{"target": None, "replace": False, "verify": False, "trace": None,
                        option: "dml" if option == "target" else True})
    with pytest.raises(UsageError, match=f"--{option} does not combine with --nproc"):
        refuse_single_scan_options(args, "--nproc")
    refuse_single_scan_options(Namespace(target=None, replace=False, verify=False), "--nproc")  # none given: fine


@pytest.mark.parametrize("waited, says, never", [
    (5.0, "who wait for it in their collectives (5.000 ms more comm per step", "not seen waiting"),
    (-7674.6, "(7.67 s less per step), so they are not seen waiting for it", "-7"),
    (0.0, "took no longer than its own, so they are not seen waiting", "0.0 us more"),
])
def test_the_straggler_sentence_agrees_with_the_comm_figures(waited, says, never):
    """Only a positive difference in the others' comm time is them waiting; a negative one is never 'more comm'."""
    from dmlprof.report.run import _straggler_sentence

    found = {"rank": 1, "busy_excess_ms": 20.0, "fallback_excess_ms": 20.0, "cpu_excess_ms": 0.0,
             "compute_excess_ms": 0.0, "others_comm_excess_ms": waited, "threshold_ms": 2.0}
    sentence = _straggler_sentence(found)
    assert says in sentence and never not in sentence
