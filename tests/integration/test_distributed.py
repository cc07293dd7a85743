"""Distributed runs for real: 2 CPU ranks over gloo, started by ``dmlprof scan --nproc 2`` and by torchrun.

Every check reads what a user gets: the run folder (one session per rank),
the merged report (--json), each rank's torch.profiler trace, the one error
line of a failed run. Kept small (LeNet-sized, few steps): the CI machine has
two cores for both ranks.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, MODELS, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.live]
TIMEOUT_S = 900
#: per-rank figures of the merged report against torch.profiler's trace of the same run (see _trace_figures).
#: Wide enough for two ranks sharing a loaded 2-core machine with other work (one run read 1.13 on two of
#: three steps beside another test lane); narrow enough to catch timing the wrong steps or ranges (the
#: 2.35x of counting kineto's GPU copies). How close they agree is measured by benchmarks/distributed.py.
TOLERANCE = 0.25


def _run_folder(out: Path) -> Path:
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


def _trace_figures(trace_path: Path, after_first_step: bool) -> tuple:
    """(step periods ms, collective ms, distributedInfo) as torch.profiler's own trace of a rank has them.

    Steps: the time from the end of the last op inside one ``Optimizer.step#...``
    range to the same in the next (the iteration period; the range's own end also
    holds its post-hooks, whose time a loaded machine makes vary), in order;
    collectives: the ``gloo:*`` ranges,
    which span each collective on gloo's worker threads; ``after_first_step``:
    only those after the first optimizer step (a script's trace also holds its
    set-up and warm-up step, which dmlprof does not record).
    """
    trace = json.loads(trace_path.read_text(encoding="utf-8"))
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    ends = _optimizer_ends(events)
    periods_ms = [(b - a) / 1000 for a, b in zip(ends, ends[1:])]
    since = ends[0] if after_first_step else float("-inf")
    comm_ms = sum(e["dur"] for e in events if e["name"].startswith("gloo:") and e["ts"] >= since) / 1000
    return periods_ms, comm_ms, trace.get("distributedInfo")


def _optimizer_ends(events: list) -> list:
    """Per ``Optimizer.step#`` range, in order: the end of the last ``aten::`` op inside it."""
    ends = []
    for step in sorted((e for e in events if e["name"].startswith("Optimizer.step#")), key=lambda e: e["ts"]):
        inside = [e["ts"] + e["dur"] for e in events if e["tid"] == step["tid"] and e["name"].startswith("aten::")
                  and step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"]]
        ends.append(max(inside, default=step["ts"] + step["dur"]))
    return ends


def _check_against_profiler(folder: Path, report: dict, script: bool) -> None:
    """Per rank, step for step: the report's step times against the trace's periods (the same steps,
    summed), and its collective time against the trace's gloo ranges."""
    for rank in report["ranks"]:
        periods, comm_ms, info = _trace_figures(folder / "profiler" / f"rank{rank['rank']}.pt.trace.json",
                                                after_first_step=script)
        assert info["rank"] == rank["rank"] and info["world_size"] == 2 and info["backend"] == "gloo"
        # a model file's trace holds the measured steps only: its first period is measured step 1;
        # a script's also holds its warm-up step: its first period is recorded step 0, which has no time
        ours = rank["step_times_ms"] if script else rank["step_times_ms"][1:]
        periods = periods[1:] if script else periods
        matched = min(len(ours), len(periods))
        assert matched >= 2, (ours, periods)
        # The matched steps summed, not step for step: a step's window ends after the optimizer's post-hooks
        # and the closing sync, a period at the optimizer's last op, so on this shared 2-core machine a
        # scheduling stall between the two counts in our step and in the trace's next period (one CI run read
        # [41.4, 12.7, 33.9] ms against [28.5, 25.9, 26.3]: two of three steps 29 % apart, the sums 9 %).
        ours_ms, periods_ms = sum(ours[:matched]), sum(periods[:matched])
        ours_comm = sum(c["comm_time_ms"] for c in report["collectives"] if c["rank"] == rank["rank"])
        assert abs(ours_ms / periods_ms - 1) <= TOLERANCE, (rank["rank"], ours[:matched], periods[:matched])
        assert abs(ours_comm / comm_ms - 1) <= TOLERANCE, (rank["rank"], ours_comm, comm_ms)


@pytest.fixture(scope="module")
def contract_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("contract")
    result = run_cli("scan", MODELS / "lenet5.py", "--nproc", "2", "--batch-size", "8", "--steps", "4",
                     "--out", out / "reports", "--json", out / "merged.json", "--html", out / "merged.html",
                     cwd=out, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result


def test_contract_model_gives_one_session_per_rank_and_a_merged_report(contract_run):
    out, result = contract_run
    folder = _run_folder(out / "reports")
    assert sorted(p.name for p in folder.glob("rank*.session.json")) == ["rank0.session.json", "rank1.session.json"]
    for rank in (0, 1):
        meta = json.loads((folder / f"rank{rank}.session.json").read_text())["meta"]
        assert meta["distributed"]["rank"] == rank and meta["distributed"]["world_size"] == 2
        assert meta["distributed"]["local_rank"] == rank and meta["distributed"]["backend"] == "gloo"
        assert meta["run_mode"] == "contract" and not meta["partial"]
    assert "dmlprof distributed run of lenet5" in result.stdout and f"dmlprof report {folder}" in result.stdout
    report = json.loads((out / "merged.json").read_text())
    assert report["schema"] == "dmlprof-distributed-report" and report["world_size"] == 2
    assert [r["steps"] for r in report["ranks"]] == [4, 4]
    # DDP's bucketed all-reduce, once per measured step on each rank, as the comm phase
    all_reduce = [c for c in report["collectives"] if c["op"] == "c10d::allreduce_"]
    assert sorted(c["rank"] for c in all_reduce) == [0, 1] and all(c["calls"] == 4 for c in all_reduce)
    # LeNet-5 has 61,706 float32 parameters: each step all-reduces all their gradients
    assert all(c["bytes"] == 4 * 61706 * 4 for c in all_reduce)
    # the page every report has, with the sections a run has
    page = (out / "merged.html").read_text()
    assert "<!doctype html>" in page[:200].lower() and 'id="ranks"' in page and 'id="straggler"' in page


def test_contract_step_and_comm_times_agree_with_torch_profiler_per_rank(contract_run):
    out, _ = contract_run
    folder = _run_folder(out / "reports")
    _check_against_profiler(folder, json.loads((out / "merged.json").read_text()), script=False)


def test_rank_traces_carry_distributed_info_and_the_collectives(contract_run):
    out, _ = contract_run
    folder = _run_folder(out / "reports")
    traces = sorted((folder / "traces" / folder.name).glob("rank*.pt.trace.json"))
    assert [t.name.split(".")[0] for t in traces] == ["rank0", "rank1"]
    for rank, path in enumerate(traces):
        trace = json.loads(path.read_text())
        assert trace["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": 2}
        names = [e["name"] for e in trace["traceEvents"]]
        assert names.count("gloo:all_reduce") == 4 and names.count("c10d::allreduce_") == 4


@pytest.mark.xfail(__import__("torch").__version__.startswith("2.4."), strict=False,
                   reason="torch 2.4.1: a rank of a 2-rank gloo run under torch.profiler dies by SIGABRT now and "
                          "then (1 run in 3 on this machine; the other rank then loses its peer); "
                          "torch 2.13 has never shown it")
def test_no_sync_times_the_ddp_steps_with_the_profiler_alone(cli, tmp_path):
    # DDP's bucket rebuild happens in warm-up, so every measured step has the structure step's calls
    result = cli("scan", MODELS / "lenet5.py", "--nproc", "2", "--batch-size", "8", "--steps", "2", "--no-sync",
                 "--json", tmp_path / "merged.json", timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    folder = _run_folder(tmp_path / "reports")
    for rank in (0, 1):
        meta = json.loads((folder / f"rank{rank}.session.json").read_text())["meta"]
        assert meta["recording"]["steady_state"]["matched_steps"] == 2 and meta["warmup_steps"] == 2
    report = json.loads((tmp_path / "merged.json").read_text())
    assert [r["steps"] for r in report["ranks"]] == [2, 2]
    assert all(c["comm_time_ms"] > 0 for c in report["collectives"] if c["op"] == "c10d::allreduce_")


def test_report_re_renders_the_run_folder(contract_run, cli):
    out, _ = contract_run
    folder = _run_folder(out / "reports")
    result = cli("report", folder, "--json", out / "again.json")
    assert result.returncode == 0, result.stderr
    again, first = json.loads((out / "again.json").read_text()), json.loads((out / "merged.json").read_text())
    assert again["ranks"] == first["ranks"] and again["collectives"] == first["collectives"]


def test_plain_ddp_script_under_torchrun_agrees_with_torch_profiler(tmp_path):
    # torchrun itself, as a user types it: rank 0 prints the merged report once both ranks saved theirs
    result = run_cli_module("torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(_free_port()),
                            "-m", "dmlprof", "scan", FIXTURES / "ddp_train.py", "--steps", "4",
                            "--json", tmp_path / "merged.json", "--", "--steps", "20", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dmlprof distributed run of ddp_train" in result.stdout
    folder = _run_folder(tmp_path / "reports")
    report = json.loads((tmp_path / "merged.json").read_text())
    assert report["meta"]["run_mode"] == "script" and report["ranks_found"] == [0, 1]
    # 1 unrecorded warm-up step, then 4 recorded (the first has no period); the script is stopped there
    assert [r["steps"] for r in report["ranks"]] == [3, 3]
    _check_against_profiler(folder, report, script=True)


def test_a_rank_killed_mid_run_leaves_the_other_session_and_one_error_line(cli, tmp_path):
    result = cli("scan", FIXTURES / "ddp_train.py", "--nproc", "2", "--", "--steps", "5", "--die-rank", "1",
                 "--die-step", "2", timeout=TIMEOUT_S)
    assert result.returncode == 3
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("dmlprof: error: rank 1 died (killed by SIGKILL)"), result.stderr
    folder = _run_folder(tmp_path / "reports")
    assert "sessions of rank 0 kept" in errors[0] and folder.name in errors[0]
    kept = json.loads((folder / "rank0.session.json").read_text())
    assert kept["meta"]["partial"] and len(kept["ops"]["seq"]) > 0
    assert not (folder / "rank1.session.json").exists()
    merged = cli("report", folder)
    assert merged.returncode == 0 and "missing: 1" in merged.stdout
    assert "RANK FAILED  rank 1: died (killed by SIGKILL)" in merged.stdout and "RANK FAILED  rank 0: " in merged.stdout


def test_a_rank_hanging_before_a_collective_times_out_naming_it(cli, tmp_path):
    result = cli("scan", FIXTURES / "ddp_train.py", "--nproc", "2", "--comm-timeout", "8", "--", "--steps", "5",
                 "--hang-rank", "1", "--hang-step", "2", timeout=TIMEOUT_S)
    assert result.returncode == 3
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("dmlprof: error: rank 1 never reached collective #")
    # at least the timeout (the watchdog looks twice a second; a loaded machine may make it later)
    assert re.search(r"\(c10d::allreduce_, step \d\): rank 0 waited (\d+) s there", errors[0]), errors[0]
    assert int(re.search(r"waited (\d+) s", errors[0]).group(1)) >= 8
    folder = _run_folder(tmp_path / "reports")
    for rank in (0, 1):
        assert json.loads((folder / f"rank{rank}.session.json").read_text())["meta"]["partial"]


def test_ranks_that_build_different_models_end_with_one_line(cli, tmp_path):
    result = cli("scan", FIXTURES / "ddp_mismatch.py", "--nproc", "2", "--steps", "1", timeout=TIMEOUT_S)
    assert result.returncode == 3
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("dmlprof: error: rank 0: wrapping the model in DistributedDataParallel: ")
    assert "rank 1" in errors[0].lower() and "Traceback" not in result.stderr


def run_cli_module(module, *args, cwd, timeout=TIMEOUT_S):
    import os
    import subprocess

    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout)


def _free_port() -> int:
    from dmlprof.cli.view import free_port

    return free_port()


def test_tensorboard_reads_the_rank_traces_as_one_distributed_run(tmp_path):
    # GIVEN the two rank traces of a run (synthetic sessions: the plugin is what is under test)
    import subprocess

    import pandas as pd

    from dmlprof.cli.view import free_port, tensorboard_command
    from dmlprof.distributed.annotate import frame_columns
    from dmlprof.record.collectives import collectives_frame
    from dmlprof.distributed.trace import write_rank_trace
    from session_factory import make_session
    from test_tensorboard import _get, _require_tensorboard, _stop, _wait_for_run

    _require_tensorboard()
    for rank in (0, 1):
        calls = []
        for step in range(3):
            calls += [{"op": "aten::mm", "time_ns": 40_000, "step": step, "input_devices": "cpu", "output_devices": "cpu"},
                      {"op": "c10d::allreduce_", "phase": "comm", "time_ns": 5_000, "step": step, "shapes": "[[256]]"}]
        session = make_session(calls, meta={"model_name": "ddp", "backend": "cpu", "started_at": "2026-12-01T01:02:03",
                                            "distributed": {"rank": rank, "world_size": 2, "backend": "gloo"}})
        table = collectives_frame(session.ops, None)
        table["comm_start_ns"] = pd.array(table["start_ns"] + 1_000, dtype="Int64")
        table["comm_time_ns"] = pd.array([30_000 + 10_000 * rank] * len(table), dtype="Int64")
        session.collectives = frame_columns(table)
        write_rank_trace(session, tmp_path / "tb", "ddp-run")
    port = free_port()
    base, log_path = f"http://127.0.0.1:{port}", tmp_path / "tensorboard.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(tensorboard_command(tmp_path / "tb", port), stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    try:
        _wait_for_run(base, process, "ddp-run", log_path)
        # THEN the plugin sees both ranks as workers of one run, and offers its distributed view
        assert "Distributed" in _get(base, "views", run="ddp-run")
        assert _get(base, "workers", run="ddp-run", view="Overview") == ["rank0", "rank1"]
        assert _get(base, "workers", run="ddp-run", view="Distributed") == ["All"]
    finally:
        _stop(process)


def test_a_collective_issued_from_an_autograd_device_thread_is_recorded(emulated_dml_backend, monkeypatch):
    # DDP's reducer all-reduces from autograd hooks; on a device with its own autograd thread (CUDA, and
    # the emulated DirectML device) they run on that thread. A one-rank gloo group, in this process.
    import threading

    import torch
    import torch.distributed as dist

    import dmlprof

    on_main = []

    class AllReduceGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            on_main.append(threading.current_thread() is threading.main_thread())
            host = grad.cpu()
            dist.all_reduce(host)
            return host.to(grad.device)

    # set for this test only: every later test's dmlprof would otherwise read a distributed rendezvous
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        x = torch.ones(4, device=emulated_dml_backend.device(), requires_grad=True)
        with dmlprof.profile(backend=emulated_dml_backend) as run:
            AllReduceGrad.apply(x * 2).sum().backward()
    finally:
        dist.destroy_process_group()
    assert on_main == [False]  # the hook ran on autograd's device thread
    comm = run.session.ops[run.session.ops["phase"] == "comm"]
    assert list(comm["op"]) == ["c10d::allreduce_"] and int(comm["thread"].iloc[0]) != 0
    calls = run.session.extras["collectives"]
    assert calls["bytes"] == [16] and calls["comm_time_ns"][0] > 0
