"""``dmlprof sweep`` end to end: real child processes, a forced out-of-memory, a crashing child, bad input."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import MODELS

from dmlprof.sweep.child import memory_limit_supported

pytestmark = pytest.mark.slow

# Batches below OOM_AT are tiny; from OOM_AT on each sample is 32 MiB, so the
# smallest failing batch needs 512 MiB: far past the 256 MiB cap, while the
# sizes below it need next to nothing. The edge is exactly where the test says.
STEP_MODEL = '''
import torch
from torch import nn

OOM_AT = {oom_at}


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(1))


def make_batch(batch_size):
    features = 8 << 20 if batch_size >= OOM_AT else 8
    return torch.ones(batch_size, features), torch.zeros(batch_size, 1)
'''

CRASH_MODEL = '''
import os
import torch
from torch import nn


def build_model():
    return nn.Linear(4, 1)


def make_batch(batch_size):
    if batch_size >= 8:
        print("about to die", flush=True)
        os.abort()  # SIGABRT on POSIX, a crash exit status on Windows
    return torch.ones(batch_size, 4), torch.zeros(batch_size, 1)
'''

AMP_MODEL = '''
import torch
from torch import nn


class Checked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        y = self.fc(x)
        if y.dtype != torch.bfloat16:
            raise RuntimeError(f"expected autocast to bfloat16, got {y.dtype}")
        return y.float()


def build_model():
    return Checked()


def make_batch(batch_size):
    return torch.ones(batch_size, 8), torch.zeros(batch_size, 1)
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def stderr_lines(result) -> list:
    return [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("USDT")]


@pytest.mark.skipif(not memory_limit_supported()[0], reason="the child memory cap needs RLIMIT_AS and /proc (Linux)")
def test_auto_records_a_forced_out_of_memory_and_stops_cleanly(cli, tmp_path):
    # GIVEN a model that needs 512 MiB more from batch size 16 on, and a 256 MiB cap per child
    model = write(tmp_path, "step_model.py", STEP_MODEL.format(oom_at=16))

    # WHEN --auto doubles from 4
    result = cli("sweep", model, "--auto", "--start-batch-size", "4", "--device", "cpu", "--steps", "2",
                 "--warmup", "1", "--child-memory-limit", "256MiB", "--json", "sweep.json", "--out", "runs")

    # THEN it exits 0 with no traceback, the table shows the OOM row and the recommendation
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "oom" in result.stdout and "recommended batch size:" in result.stdout
    assert "stopped: out of memory at batch size 16" in result.stdout

    # AND the JSON keeps the sizes before the OOM, records the OOM, and tried nothing after it
    document = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    rows = document["sweep"]["rows"]
    assert [r["batch_size"] for r in rows] == [4, 8, 16]
    assert [r["status"] for r in rows] == ["ok", "ok", "oom"]
    assert all(r["samples_per_s"] > 0 and r["step_ms_p95"] >= r["step_ms_p50"] > 0 for r in rows[:2])
    assert all(r["peak_memory_bytes"] > 0 and r["memory_source"] == "process peak RSS" for r in rows[:2])
    assert "allocate" in rows[2]["error"] or "MemoryError" in rows[2]["error"]
    assert document["sweep"]["recommended_batch_size"] in (4, 8)
    assert document["stop_reason"] == "out of memory at batch size 16"
    assert document["meta"]["sweep_settings"]["child_memory_limit_bytes"] == 256 << 20

    # AND the session under --out holds the same sweep in extras["sweep"]
    sessions = list((tmp_path / "runs").glob("step_model-cpu-sweep-*.session.json"))
    assert len(sessions) == 1
    saved = json.loads(sessions[0].read_text(encoding="utf-8"))
    # as saved, but for the fallback time: on the CPU nothing can fall back, so none was measured (null, not 0)
    kept = saved["extras"]["sweep"]
    assert document["sweep"] == {**kept, "rows": [{**r, "fallback_time_share": None} for r in kept["rows"]]}

    # AND `dmlprof report` re-renders the sweep from that file without running anything
    again = cli("report", sessions[0])
    assert again.returncode == 0, again.stderr
    assert "batch-size sweep of step_model" in again.stdout and "out of memory at batch size 16" in again.stdout


def test_a_child_that_dies_is_an_error_row_and_stops_auto(cli, tmp_path):
    # GIVEN a model whose process aborts at batch size 8
    model = write(tmp_path, "crash_model.py", CRASH_MODEL)

    result = cli("sweep", model, "--auto", "--start-batch-size", "4", "--device", "cpu", "--steps", "1",
                 "--warmup", "0", "--json", "sweep.json", "--no-progress")

    # THEN the sweep itself survives: exit 0, size 4 kept, size 8 an error that says how the child died
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))["sweep"]["rows"]
    assert [(r["batch_size"], r["status"]) for r in rows] == [(4, "ok"), (8, "error")]
    if sys.platform != "win32":
        assert "SIGABRT" in rows[1]["error"]
    assert "about to die" in rows[1]["error"]
    assert "stopped: error at batch size 8" in result.stdout


def test_every_size_failing_is_one_line_and_a_non_zero_exit(cli, tmp_path):
    model = write(tmp_path, "bad_batch.py", "import torch\ndef build_model():\n    return torch.nn.Linear(2, 1)\n"
                                             "def make_batch(batch_size):\n    raise ValueError('no data here')\n")
    result = cli("sweep", model, "--batch-sizes", "2", "--device", "cpu", "--no-progress")
    assert result.returncode == 3
    assert "Traceback" not in result.stderr
    assert stderr_lines(result) == ["dmlprof: error: no batch size ran: ValueError: no data here"]
    assert "error" in result.stdout  # the table still shows the failed row


@pytest.mark.parametrize("args,expected", [
    (["--batch-sizes", "8,x"], "--batch-sizes: 'x' is not a whole number"),
    (["--batch-sizes", "8", "--memory-budget", "lots"], "--memory-budget: 'lots' is not a size"),
    (["--batch-sizes", "8", "--child-memory-limit", "-1"], "--child-memory-limit"),
    (["--batch-sizes", "8", "--steps", "0"], "--steps: 0 is too small (at least 1)"),
])
def test_bad_options_are_one_line(cli, args, expected):
    result = cli("sweep", MODELS / "lenet5.py", "--device", "cpu", *args)
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and lines[0].startswith("dmlprof: error: ") and expected in lines[0], result.stderr


def test_bad_model_paths_are_one_line(cli, tmp_path):
    missing = cli("sweep", tmp_path / "nope.py", "--batch-sizes", "8")
    assert missing.returncode == 2 and stderr_lines(missing) == [f"dmlprof: error: no such file: {tmp_path / 'nope.py'}"]
    script = write(tmp_path, "script.py", "steps = 3\nprint('training', steps)\n")
    result = cli("sweep", script, "--batch-sizes", "8")
    assert result.returncode == 2 and len(stderr_lines(result)) == 1 and "is a script" in result.stderr


@pytest.mark.live
def test_lenet_auto_small_finishes_with_a_recommendation_and_outputs(cli, tmp_path):
    # --auto starts at LeNet's BATCH_SIZE / 4 = 16; capped at 32 here to keep the test short.
    result = cli("sweep", MODELS / "lenet5.py", "--auto", "--max-batch-size", "32", "--device", "cpu",
                 "--steps", "2", "--json", "sweep.json", "--html", "sweep.html", "--out", "runs")
    assert result.returncode == 0, result.stderr
    assert "recommended batch size: " in result.stdout and "reached --max-batch-size 32" in result.stdout
    assert "batch sizes" not in result.stderr and "%|" not in result.stderr  # stderr is a pipe: no progress bar
    document = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    assert [r["batch_size"] for r in document["sweep"]["rows"]] == [16, 32]
    assert document["sweep"]["recommended_batch_size"] in (16, 32)
    assert document["sweep"]["memory_budget_bytes"] == int(0.7 * document["meta"]["memory_total_bytes"])
    html = (tmp_path / "sweep.html").read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")


@pytest.mark.live
def test_amp_runs_the_forward_under_autocast(cli, tmp_path):
    model = write(tmp_path, "amp_model.py", AMP_MODEL)
    with_amp = cli("sweep", model, "--batch-sizes", "4", "--amp", "bf16", "--device", "cpu", "--steps", "1",
                   "--json", "amp.json", "--no-progress")
    assert with_amp.returncode == 0, with_amp.stderr
    row = json.loads((tmp_path / "amp.json").read_text(encoding="utf-8"))["sweep"]["rows"][0]
    assert row["status"] == "ok", row
    # Without --amp the same model sees float32 and says so: autocast really was what made it pass.
    without = cli("sweep", model, "--batch-sizes", "4", "--device", "cpu", "--steps", "1", "--no-progress")
    assert without.returncode == 3 and "expected autocast to bfloat16" in without.stderr


@pytest.mark.live
def test_child_records_one_step_for_the_fallback_share(tmp_path):
    from dmlprof.sweep.driver import child_command, run_child

    argv = child_command(MODELS / "lenet5.py", 4, device="cpu", steps=1, warmup=0, amp=None, memory_limit=None,
                         record="always")
    result = run_child(argv, 4, 600)
    assert result["status"] == "ok", result
    assert result["fallback_recorded"] is True
    assert result["fallback_time_share"] == 0.0 and result["fallback_ops"] == []  # the CPU cannot fall back


def test_run_child_times_out_a_hung_child_and_ticks_while_waiting():
    from dmlprof.sweep.driver import run_child

    ticks = []
    result = run_child([sys.executable, "-c", "import time; time.sleep(30)"], 8, 2.5, tick=lambda: ticks.append(1))
    assert result["status"] == "error" and "timed out after" in result["error"]
    assert len(ticks) >= 1


def test_run_child_reads_the_result_line_among_other_output():
    from dmlprof.sweep.child import RESULT_MARKER
    from dmlprof.sweep.driver import run_child

    code = (f"import json, sys; print('noise'); print('warn', file=sys.stderr); "
            f"print({RESULT_MARKER!r} + json.dumps({{'batch_size': 8, 'status': 'oom', 'error': 'x'}}))")
    result = run_child([sys.executable, "-c", code], 8, 60)
    assert result["status"] == "oom" and result["error"] == "x"


@pytest.mark.live
def test_fallback_share_on_the_emulated_directml_device(cli, tmp_path):
    from dmlprof.backends import backend_class

    status = backend_class("emulated-dml").availability()
    assert status.available, f"the emulated DML device must build here: {status.reason}"
    # GroupNorm's backward and Adam's lerp fall back on DirectML: the recorded step must see them.
    result = cli("sweep", MODELS / "groupnorm_net.py", "--batch-sizes", "4", "--device", "emulated-dml",
                 "--steps", "1", "--json", "sweep.json", "--no-progress")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    row = document["sweep"]["rows"][0]
    assert row["status"] == "ok" and 0.0 < row["fallback_time_share"] < 1.0
    assert document["details"][0]["fallback_recorded"] is True
    assert "aten::native_group_norm_backward" in document["details"][0]["fallback_ops"]
    assert "fell back to the CPU" in result.stdout
