"""The --tb trace in the real thing: TensorBoard with torch-tb-profiler, over its HTTP API.

Starts ``tensorboard --logdir DIR --host 127.0.0.1 --port FREE``, waits (bounded)
for the run to load, asks for runs, views, workers, spans, the operator table
and the trace, and always stops the server. Also runs ``dmlprof view``.
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from dmlprof.cli.view import free_port, tensorboard_command
from dmlprof.render.trace import write_tensorboard_run
from conftest import SIGNALS_REACH
from session_factory import make_session

pytestmark = pytest.mark.slow
LOAD_TIMEOUT_S = 120


def _require_tensorboard():
    # test extras (pip install -e '.[test]'): a missing install fails, it does not skip
    import tensorboard  # noqa: F401
    import torch_tb_profiler  # noqa: F401


def _session():
    calls = []
    for step in range(3):
        calls += [
            {"op": "aten::convolution", "time_ns": 40_000, "module": "Net.conv", "step": step},
            {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 25_000, "module": "Net.pool", "step": step,
             "source": "models/net.py:31"},
            {"op": "aten::convolution_backward", "time_ns": 70_000, "phase": "backward", "module": "Net.conv", "step": step},
            {"op": "aten::_foreach_lerp_.Scalar", "verdict": "fallback", "time_ns": 60_000, "phase": "optimizer",
             "module": "", "source": "train.py:40", "fallback_ops": "aten::lerp.Scalar_out=4", "fallback_calls": 4,
             "step": step},
        ]
    return make_session(calls, meta={"model_name": "tbnet", "started_at": "2026-11-30T01:02:03"})


def _get(base, path, **params):
    url = f"{base}/data/plugin/pytorch_profiler/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=30) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return json.loads(body)


def _wait_for_run(base, process, run, log_path):
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    last = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"tensorboard exited with {process.returncode}: {log_path.read_text(errors='replace')[-2000:]}")
        try:
            last = _get(base, "runs")
            if run in last["runs"] and not last["loading"]:
                return last
        except (urllib.error.URLError, ConnectionError, OSError, ValueError):
            pass
        time.sleep(1)
    pytest.fail(f"run {run} did not appear within {LOAD_TIMEOUT_S} s (last answer {last}); "
                f"log: {log_path.read_text(errors='replace')[-2000:]}")


def _stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def test_tensorboard_plugin_shows_the_run_and_the_fallbacks(tmp_path):
    _require_tensorboard()
    # GIVEN a session with fallbacks written with --tb
    logdir = tmp_path / "tb"
    trace_path = write_tensorboard_run(_session(), logdir)
    run = trace_path.parent.name
    worker = trace_path.name.split(".")[0]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "tensorboard.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(tensorboard_command(logdir, port), stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    try:
        # WHEN TensorBoard has loaded it
        runs = _wait_for_run(base, process, run, log_path)
        # THEN the plugin lists the run, its views, the worker and its span
        assert runs["runs"] == [run]
        views = _get(base, "views", run=run)
        assert {"Overview", "Operator", "Trace"} <= set(views)
        assert _get(base, "workers", run=run, view="Overview") == [worker]
        spans = _get(base, "spans", run=run, worker=worker)
        assert len(spans) == 1
        span = spans[0]
        # the overview found the three steps
        overview = _get(base, "overview", run=run, worker=worker, span=span)
        assert [row[0] for row in overview["steps"]["rows"]] == ["0", "1", "2"]
        # the operator table aggregates the calls, and the fallback marks with them
        table = {row["name"]: row for row in _get(base, "operation/table", run=run, worker=worker, span=span,
                                                  group_by="Operation")["data"]}
        assert table["aten::convolution"]["calls"] == 3
        assert table["aten::cumsum"]["calls"] == 3
        assert table["fallback::aten::cumsum"]["calls"] == 3
        assert table["fallback::aten::lerp.Scalar_out"]["calls"] == 3
        # a mark spans its call exactly: same total time, no self time of its own
        assert table["fallback::aten::cumsum"]["host_total_duration"] == table["aten::cumsum"]["host_total_duration"] == 75
        assert table["fallback::aten::cumsum"]["host_self_duration"] == 0
        assert not any(name.startswith("fallback::") and "convolution" in name for name in table)
        # the source line is the op's call stack
        stack = _get(base, "operation/stack", run=run, worker=worker, span=span, group_by="Operation", op_name="aten::cumsum")
        assert any("models/net.py(31)" in row.get("call_stack", "") for row in stack["data"])
        # and the trace view serves the file with the marks in it
        trace = _get(base, "trace", run=run, worker=worker, span=span)
        names = [e["name"] for e in trace["traceEvents"]]
        assert names.count("fallback::aten::cumsum") == 3 and "ProfilerStep#2" in names
        assert "Error in input data" not in log_path.read_text(errors="replace")
    finally:
        _stop(process)
    assert process.poll() is not None


def test_dmlprof_view_starts_tensorboard_and_stops_on_interrupt(tmp_path):
    _require_tensorboard()
    logdir = tmp_path / "tb"
    run = write_tensorboard_run(_session(), logdir).parent.name
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen([sys.executable, "-m", "dmlprof", "view", str(logdir)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env, stdin=subprocess.DEVNULL,
                               **SIGNALS_REACH)
    try:
        line = process.stdout.readline()  # printed once TensorBoard listens
        assert line.startswith("TensorBoard: http://127.0.0.1:"), line
        base = line.split()[1].split("/#")[0]
        _wait_for_run(base, process, run, tmp_path / "unused.log")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT if sys.platform != "win32" else signal.CTRL_C_EVENT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
            pytest.fail("dmlprof view did not stop on Ctrl-C")
    assert process.returncode == 0
    # its TensorBoard is gone too: the port no longer answers
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        _get(base, "runs")


def test_dmlprof_view_without_tensorboard_is_one_line(tmp_path):
    # a tensorboard package that cannot be imported, ahead of the real one on the path
    shim = tmp_path / "shim" / "tensorboard"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('no tensorboard here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim.parent), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "dmlprof", "view", str(tmp_path)], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "dmlprof: error: tensorboard is not installed (pip install 'dmlprof[tensorboard]')"]
    assert "Traceback" not in result.stderr
