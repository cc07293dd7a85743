"""Sweep logic without running a model: analysis, option parsing, child results, the driver's stop rules."""
from __future__ import annotations

import json
import math
import signal
import sys

import pytest

from dmlprof.analysis.sweep import (
    SWEEP_COLUMNS,
    fits_budget,
    growth_per_doubling,
    knee_batch_size,
    recommended_batch_size,
    sweep_frame,
    sweep_summary,
)
from dmlprof.errors import ModelFileError, UsageError
from dmlprof.session import Session
from dmlprof.sweep.child import RESULT_MARKER, percentile
from dmlprof.sweep.driver import (
    child_command,
    describe_exit,
    parse_child_output,
    run_sweep,
)
from dmlprof.sweep.options import (
    MemoryBudget,
    auto_sizes,
    auto_start_size,
    file_batch_size,
    parse_batch_sizes,
    parse_bytes,
    parse_memory_budget,
)
from dmlprof.render.json_report import render_json as render_sweep_json
from dmlprof.render.terminal import render_sweep_text

GiB = 1024**3


def row(batch_size, rate=0.0, status="ok", peak=None, error=None, share=0.0):
    return {
        "batch_size": batch_size, "status": status, "samples_per_s": rate,
        "step_ms_p50": 1000.0 * batch_size / rate if rate else 0.0,
        "step_ms_p95": 1100.0 * batch_size / rate if rate else 0.0,
        "peak_memory_bytes": peak, "memory_source": "test" if peak is not None else "",
        "fallback_time_share": share, "error": error,
    }


def frame(*rows):
    return sweep_frame(list(rows))


# -- knee -----------------------------------------------------------------------
def test_knee_flat_throughput_is_the_first_size():
    f = frame(row(8, 1000), row(16, 1010), row(32, 1005), row(64, 1020))
    assert knee_batch_size(f) == 8


def test_knee_monotone_growth_is_not_reached():
    f = frame(row(8, 100), row(16, 190), row(32, 350), row(64, 600))
    assert knee_batch_size(f) is None


def test_knee_after_growth_then_plateau():
    f = frame(row(8, 100), row(16, 200), row(32, 380), row(64, 390), row(128, 395))
    assert knee_batch_size(f) == 32


def test_knee_ignores_a_noisy_dip_followed_by_real_growth():
    # 16 -> 32 grows 2 %, but 64 is far faster than 16: 16 is not where growth ended.
    f = frame(row(8, 100), row(16, 200), row(32, 204), row(64, 400), row(128, 405))
    assert knee_batch_size(f) == 64


def test_knee_normalises_uneven_steps_to_doublings():
    # 8 -> 32 is two doublings: +8 % in all is under 4 % per doubling.
    assert knee_batch_size(frame(row(8, 1000), row(32, 1080))) == 8
    # +21 % over two doublings is 10 % per doubling: still growing.
    assert knee_batch_size(frame(row(8, 1000), row(32, 1210))) is None


def test_knee_threshold_is_a_parameter():
    f = frame(row(8, 100), row(16, 108), row(32, 116))
    assert knee_batch_size(f) is None
    assert knee_batch_size(f, min_growth=0.10) == 8


def test_knee_skips_failed_sizes_and_needs_two_ok_sizes():
    assert knee_batch_size(frame(row(8, 100), row(16, status="oom", error="out"))) is None
    f = frame(row(8, 100), row(16, status="error", error="x"), row(32, 101))
    assert knee_batch_size(f) == 8
    assert knee_batch_size(frame()) is None


def test_growth_per_doubling_column():
    g = growth_per_doubling(frame(row(16, 100), row(8, 50), row(64, 400)))
    assert g["batch_size"].tolist() == [8, 16, 64]
    assert math.isnan(g["growth_per_doubling"].iloc[0])
    assert g["growth_per_doubling"].iloc[1] == pytest.approx(1.0)
    assert g["growth_per_doubling"].iloc[2] == pytest.approx(1.0)  # x4 over two doublings


# -- recommendation -------------------------------------------------------------
def test_recommendation_best_throughput_within_budget():
    f = frame(row(8, 100, peak=1 * GiB), row(16, 180, peak=2 * GiB), row(32, 250, peak=5 * GiB))
    assert recommended_batch_size(f, 4 * GiB) == 16
    assert recommended_batch_size(f, 5 * GiB) == 32  # at the budget counts as within
    assert recommended_batch_size(f, None) == 32


def test_recommendation_none_when_no_size_fits_the_budget():
    f = frame(row(8, 100, peak=3 * GiB), row(16, 180, peak=4 * GiB))
    assert recommended_batch_size(f, 2 * GiB) is None
    assert sweep_summary([row(8, 100, peak=3 * GiB)], 2 * GiB)["recommended_batch_size"] is None


def test_recommendation_prefers_smaller_size_on_a_tie_and_ignores_failures():
    f = frame(row(8, 100), row(16, 200), row(32, 200), row(64, status="oom", error="out of memory"))
    assert recommended_batch_size(f, None) == 16
    assert recommended_batch_size(frame(row(8, status="oom", error="x")), None) is None


def test_recommendation_with_flat_throughput_and_monotone_growth():
    flat = frame(row(8, 1000, peak=1), row(16, 1000, peak=2), row(32, 1000, peak=3))
    assert recommended_batch_size(flat, None) == 8
    growing = frame(row(8, 100, peak=1 * GiB), row(16, 200, peak=2 * GiB), row(32, 400, peak=8 * GiB))
    assert recommended_batch_size(growing, 3 * GiB) == 16


def test_unknown_peak_memory_fits_the_budget():
    f = frame(row(8, 100, peak=None), row(16, 200, peak=10 * GiB))
    assert fits_budget(f, GiB).tolist() == [True, False]
    assert recommended_batch_size(f, GiB) == 8


def test_summary_has_exactly_the_schema_keys_and_types():
    rows = [row(16, 200.5, peak=2 * GiB, share=0.25), row(8, 100, peak=GiB), row(32, status="oom", error="not enough GPU video memory")]
    summary = sweep_summary(rows, 3 * GiB)
    assert set(summary) == {"rows", "recommended_batch_size", "knee_batch_size", "memory_budget_bytes"}
    assert [r["batch_size"] for r in summary["rows"]] == [8, 16, 32]
    for r in summary["rows"]:
        assert tuple(r) == SWEEP_COLUMNS
        assert isinstance(r["batch_size"], int) and isinstance(r["samples_per_s"], float)
        assert r["peak_memory_bytes"] is None or type(r["peak_memory_bytes"]) is int
    assert summary["rows"][2]["peak_memory_bytes"] is None
    assert summary["rows"][1]["fallback_time_share"] == 0.25
    assert summary["recommended_batch_size"] == 16
    assert summary["memory_budget_bytes"] == 3 * GiB
    json.dumps(summary, allow_nan=False)  # plain JSON, no numpy or pandas values


# -- options --------------------------------------------------------------------
def test_parse_batch_sizes():
    assert parse_batch_sizes("64, 8,16,8") == [8, 16, 64]
    for bad in ("", "8,x", "0,8", "-4"):
        with pytest.raises(UsageError):
            parse_batch_sizes(bad)


@pytest.mark.parametrize("text,expected", [
    ("8GiB", 8 * GiB), ("8g", 8 * GiB), ("512MB", 512 * 10**6), ("1.5GiB", int(1.5 * GiB)),
    ("1048576", 1048576), ("64 KiB", 65536),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["", "8 parsecs", "GiB", "-5MB", "0"])
def test_parse_bytes_rejects(bad):
    with pytest.raises(UsageError):
        parse_bytes(bad)


def test_parse_memory_budget():
    assert parse_memory_budget(None) == MemoryBudget(fraction=0.7)
    assert parse_memory_budget("0.5") == MemoryBudget(fraction=0.5)
    assert parse_memory_budget("25%") == MemoryBudget(fraction=0.25)
    assert parse_memory_budget("8GiB") == MemoryBudget(bytes=8 * GiB)
    assert parse_memory_budget("8000000000") == MemoryBudget(bytes=8_000_000_000)
    for bad in ("0", "150%", "2.5", "lots"):
        with pytest.raises(UsageError):
            parse_memory_budget(bad)


def test_budget_resolves_against_the_reported_total():
    assert MemoryBudget(fraction=0.5).resolve(10 * GiB) == 5 * GiB
    assert MemoryBudget(fraction=0.5).resolve(None) is None
    assert MemoryBudget(bytes=GiB).resolve(None) == GiB
    assert "does not report" in MemoryBudget(fraction=0.7).describe(None)
    assert "70%" in MemoryBudget(fraction=0.7).describe(10 * GiB)


def test_auto_start_size_reads_the_file_without_running_it(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("raise SystemExit('must not run')\nBATCH_SIZE = 64\n")
    assert file_batch_size(model) == 64
    assert auto_start_size(model) == 16
    assert auto_start_size(model, start=3) == 3
    model.write_text("BATCH_SIZE = compute()\n")
    assert auto_start_size(model) == 1
    model.write_text("BATCH_SIZE = 2\n")
    assert auto_start_size(model) == 1
    with pytest.raises(UsageError):
        auto_start_size(model, start=0)


def test_auto_sizes_double_up_to_the_max():
    assert auto_sizes(16, 100) == [16, 32, 64]
    assert auto_sizes(3, 3) == [3]
    with pytest.raises(UsageError):
        auto_sizes(16, 8)


def test_percentile():
    assert percentile([5.0], 95) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0, 10.0], 95) == pytest.approx(8.8)


# -- child results ----------------------------------------------------------------
def test_child_output_is_found_among_other_prints():
    line = RESULT_MARKER + json.dumps({"batch_size": 8, "status": "oom", "error": "x"})
    result = parse_child_output(8, 0, f"model says hi\n{line}\n", "")
    assert result["status"] == "oom"


def test_child_that_died_is_an_error_with_the_reason():
    killed = parse_child_output(8, -signal.SIGKILL, "", "loading...\n")
    assert killed["status"] == "error" and "SIGKILL" in killed["error"] and "loading" in killed["error"]
    assert set(killed) == set(SWEEP_COLUMNS)
    assert "SIGSEGV" in describe_exit(-signal.SIGSEGV)
    assert "0xC0000005" in describe_exit(0xC0000005)
    assert "status 1" in parse_child_output(8, 1, "garbage", "Traceback...\nValueError: bad")["error"]
    # A result for another size is not this size's result.
    other = RESULT_MARKER + json.dumps({"batch_size": 16, "status": "ok"})
    assert parse_child_output(8, 0, other, "")["status"] == "error"


def test_child_command_runs_this_interpreter_with_its_options(monkeypatch):
    import dmlprof.survival

    # python -O -W error -m dmlprof sweep: the model runs with the options python was given
    monkeypatch.setattr(dmlprof.survival, "interpreter_options", lambda: ["-O", "-Werror"])
    argv = child_command(__file__, 32, device="cpu", steps=3, warmup=1, amp="bf16", memory_limit=1000)
    assert argv[:5] == [sys.executable, "-O", "-Werror", "-m", "dmlprof.sweep.child"]
    assert argv[argv.index("--batch-size") + 1] == "32"
    assert argv[argv.index("--amp") + 1] == "bf16"
    assert argv[argv.index("--memory-limit") + 1] == "1000"


# -- the driver's stop rules, with a fake child -------------------------------------
@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "fake_model.py"
    path.write_text("BATCH_SIZE = 32\ndef build_model():\n    pass\ndef make_batch(batch_size):\n    pass\n")
    return path


def fake_runner(outcomes, calls):
    """A child runner answering from ``outcomes`` (size -> row dict) and noting each size asked."""
    def runner(argv, batch_size, timeout_s, tick=None):
        calls.append(batch_size)
        result = dict(outcomes(batch_size))
        result.setdefault("memory_total_bytes", 100 * GiB)
        return result
    return runner


def test_auto_doubles_from_a_quarter_of_batch_size_and_stops_at_oom(model_file):
    calls = []
    result = run_sweep(model_file, "cpu", auto=True, runner=fake_runner(
        lambda bs: row(bs, 10.0 * bs, peak=bs * 1000) if bs < 64 else row(bs, status="oom", error="DefaultCPUAllocator: can't allocate memory"),
        calls))
    assert calls == [8, 16, 32, 64]
    assert result.stop_reason == "out of memory at batch size 64"
    summary = result.summary()
    assert [r["status"] for r in summary["rows"]] == ["ok", "ok", "ok", "oom"]
    assert summary["recommended_batch_size"] == 32
    assert summary["memory_budget_bytes"] == int(0.7 * 100 * GiB)


def test_auto_stops_over_the_memory_budget_and_keeps_that_row(model_file):
    calls = []
    result = run_sweep(model_file, "cpu", auto=True, start_batch_size=1, memory_budget=MemoryBudget(bytes=5000),
                       runner=fake_runner(lambda bs: row(bs, 10.0 * bs, peak=bs * 1000), calls))
    assert calls == [1, 2, 4, 8]
    assert "over the memory budget" in result.stop_reason
    assert result.summary()["recommended_batch_size"] == 4


def test_auto_stops_at_the_first_error_and_at_the_max(model_file):
    calls = []
    result = run_sweep(model_file, "cpu", auto=True, start_batch_size=2,
                       runner=fake_runner(lambda bs: row(bs, 1.0) if bs < 8 else row(bs, status="error", error="boom"), calls))
    assert calls == [2, 4, 8] and result.stop_reason == "error at batch size 8"
    calls.clear()
    result = run_sweep(model_file, "cpu", auto=True, start_batch_size=2, max_batch_size=16,
                       runner=fake_runner(lambda bs: row(bs, 1.0 * bs), calls))
    assert calls == [2, 4, 8, 16] and result.stop_reason == "reached --max-batch-size 16"


def test_auto_respects_the_time_budget(model_file, monkeypatch):
    import dmlprof.sweep.driver as driver

    clock = {"now": 0.0}
    monkeypatch.setattr(driver, "_clock", lambda: clock["now"])
    calls = []

    def slow(bs):
        clock["now"] += 10.0 * bs  # each child takes 10 s per sample
        return row(bs, 1.0 * bs)

    result = run_sweep(model_file, "cpu", auto=True, start_batch_size=1, time_budget_s=100,
                       runner=fake_runner(slow, calls))
    # 1, 2, 4 end at 70 s; 8 would take about 2 * 40 s more.
    assert calls == [1, 2, 4]
    assert result.stop_reason.startswith("time budget")


def test_explicit_sizes_all_run_even_after_an_oom(model_file):
    calls = []
    result = run_sweep(model_file, "cpu", batch_sizes=[8, 16, 32], runner=fake_runner(
        lambda bs: row(bs, status="oom", error="x") if bs == 16 else row(bs, 1.0 * bs), calls))
    assert calls == [8, 16, 32]
    assert [r["status"] for r in result.summary()["rows"]] == ["ok", "oom", "ok"]


def test_sweep_rejects_bad_input(model_file, tmp_path):
    with pytest.raises(UsageError):
        run_sweep(model_file, "cpu")  # neither sizes nor --auto
    with pytest.raises(UsageError):
        run_sweep(model_file, "cpu", batch_sizes=[8], steps=0)
    script = tmp_path / "script.py"
    script.write_text("print('training')\n")
    with pytest.raises(ModelFileError):
        run_sweep(script, "cpu", batch_sizes=[8])
    with pytest.raises(ModelFileError):
        run_sweep(tmp_path / "missing.py", "cpu", batch_sizes=[8])


def test_interrupt_keeps_what_ran(model_file):
    def runner(argv, batch_size, timeout_s, tick=None):
        if batch_size == 16:
            raise KeyboardInterrupt
        return row(batch_size, 1.0)

    result = run_sweep(model_file, "cpu", batch_sizes=[8, 16, 32], runner=runner)
    assert result.interrupted and result.stop_reason == "interrupted"
    assert [r["batch_size"] for r in result.summary()["rows"]] == [8]
    assert result.to_session().meta.to_dict()["partial"] is True


# -- session, text, JSON ------------------------------------------------------------
def test_session_round_trip_and_renderers(model_file, tmp_path):
    calls = []
    result = run_sweep(model_file, "cpu", batch_sizes=[8, 16, 32], runner=fake_runner(
        lambda bs: {**(row(bs, status="oom", error="not enough GPU video memory available!") if bs == 32
                       else row(bs, 100.0 * bs, peak=bs * GiB)), "fallback_recorded": False}, calls))  # as on the CPU
    session = result.to_session()
    path = session.save(tmp_path / session.default_filename())
    loaded = Session.load(path)
    assert loaded.extras["sweep"] == session.extras["sweep"]
    assert loaded.meta.to_dict()["mode"] == "sweep" and "sweep" in path.name

    text = render_sweep_text(loaded)
    assert "<- recommended" in text and "oom" in text and "not enough GPU video memory" in text
    assert "recommended batch size: 16" in text
    text.encode("ascii")  # any console can print it

    document = json.loads(render_sweep_json(loaded))
    assert document["format"] == "dmlprof-sweep" and document["schema_version"] == 1
    # as saved, but for the fallback time: on the CPU nothing can fall back, so none was measured (null, not 0)
    saved = session.extras["sweep"]
    assert document["sweep"] == {**saved, "rows": [{**r, "fallback_time_share": None} for r in saved["rows"]]}
    assert document["stop_reason"] == "ran every listed size"
    assert [d["batch_size"] for d in document["details"]] == [8, 16, 32]


def test_text_says_when_nothing_fits():
    session = Session(meta={"model_name": "m", "memory_budget": "1 B"},
                      **{"sweep": sweep_summary([row(8, 100, peak=GiB)], 1)})
    assert "recommended batch size: none" in render_sweep_text(session)


# -- the child's memory cap ---------------------------------------------------------
def test_memory_cap_is_skipped_with_a_note_where_unsupported(monkeypatch):
    import dmlprof.sweep.child as child

    monkeypatch.setattr(child, "memory_limit_supported", lambda: (False, "needs POSIX; ignored"))
    cap = child.MemoryCap(1 << 20)
    cap.apply()
    assert not cap.applied and cap.note == "needs POSIX; ignored"
    cap.lift()  # nothing to undo
    assert child.MemoryCap(None).note == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/statm: Linux")
def test_memory_cap_is_relative_to_the_loaded_process_and_lifted_again():
    import errno
    import mmap
    import resource

    import dmlprof.sweep.child as child

    before = resource.getrlimit(resource.RLIMIT_AS)
    cap = child.MemoryCap(64 << 20)
    cap.apply()
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        assert cap.applied
        assert 0 < soft - child.address_space_bytes() <= 64 << 20
        # A fresh anonymous mapping, not bytearray: after a long test run malloc may hand
        # out a large chunk it already holds, which costs no new address space (seen in CI).
        with pytest.raises(OSError) as refused:
            mmap.mmap(-1, 128 << 20)
        assert refused.value.errno == errno.ENOMEM
    finally:
        cap.lift()
    assert resource.getrlimit(resource.RLIMIT_AS) == before


# -- the child in-process, on a fake backend -------------------------------------------
TINY_MODEL = """
import torch
def build_model():
    return torch.nn.Linear(4, 2)
def make_batch(batch_size):
    return torch.ones(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)
"""


def _fake_backend(readings, oom_on_batch=False):
    from dmlprof.backends.base import MemoryReading
    from dmlprof.backends.cpu import CpuBackend

    class Fake(CpuBackend):
        name = "fake"
        calls = []

        def memory(self):
            value = readings[min(len(self.calls), len(readings) - 1)]
            self.calls.append(value)
            return MemoryReading(allocated_bytes=value, source="fake allocator")

    return Fake()


def test_child_takes_the_largest_reading_where_the_backend_keeps_no_peak(tmp_path, monkeypatch):
    import dmlprof.backends
    from dmlprof.sweep.child import build_parser, measure

    model = tmp_path / "tiny.py"
    model.write_text(TINY_MODEL)
    # first reading, warm-up forward (activations alive), after each of 2 timed steps, final reading
    backend = _fake_backend([100, 9000, 200, 300, 250])
    monkeypatch.setattr(dmlprof.backends, "resolve_backend", lambda name, index=0: backend)
    result = measure(build_parser().parse_args([str(model), "--batch-size", "3", "--steps", "2", "--warmup", "1"]))
    assert result["status"] == "ok", result
    assert result["peak_memory_bytes"] == 9000
    assert result["memory_source"].startswith("fake allocator (largest reading")
    assert len(result["step_times_ms"]) == 2 and result["samples_per_s"] > 0


@pytest.mark.parametrize("raise_line,status,error", [
    ("raise MemoryError()", "oom", "MemoryError"),
    ("raise RuntimeError('Could not allocate tensor with 4 bytes. There is not enough GPU video memory available!')",
     "oom", "not enough GPU video memory"),
    ("raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')", "oom", "CUDA out of memory"),
    ("raise KeyError('label')", "error", "KeyError: 'label'"),
])
def test_child_reports_out_of_memory_as_oom_and_other_errors_as_error(tmp_path, monkeypatch, raise_line, status, error):
    import dmlprof.backends
    from dmlprof.sweep.child import build_parser, measure

    monkeypatch.setattr(dmlprof.backends, "resolve_backend", lambda name, index=0: _fake_backend([1]))
    model = tmp_path / "m.py"
    model.write_text(TINY_MODEL.replace("    return torch.ones(batch_size, 4)", f"    {raise_line}\n    return torch.ones(batch_size, 4)"))
    result = measure(build_parser().parse_args([str(model), "--batch-size", "3"]))
    assert result["status"] == status, result
    assert error in result["error"]


def test_text_flags_noisy_sizes():
    steady, noisy = row(8, 100), row(16, 200)
    noisy["step_ms_p95"] = 3 * noisy["step_ms_p50"]
    text = render_sweep_text(Session(meta={"model_name": "m"}, **{"sweep": sweep_summary([steady, noisy], None)}))
    lines = text.splitlines()
    assert "noisy" not in next(l for l in lines if l.startswith("8 "))
    assert "noisy" in next(l for l in lines if l.startswith("16 "))
    assert any(l.startswith("noisy: step p95 over 2x p50") for l in lines)


def test_a_sweep_on_the_cpu_has_no_fallback_column():
    """Nothing falls back on the CPU: a column of 0.0% there reads as a measurement."""
    from session_kinds import sweep

    on_gpu = render_sweep_text(sweep(), width=120)
    session = sweep()
    session.meta = session.meta.updated(device=session.meta.device.__class__(
        **{**vars(session.meta.device), "backend": "cpu", "device": "cpu"}))
    on_cpu = render_sweep_text(session, width=120)
    header = next(line for line in on_cpu.splitlines() if line.startswith("batch "))
    assert "fallback" not in header and "fallback" in next(l for l in on_gpu.splitlines() if l.startswith("batch "))


def test_a_noisy_sweep_is_said_to_be_noisy_on_the_page_as_in_the_terminal():
    """Throughputs of 38/617/219/836/340/348 samples/s: the page must not recommend in green what the terminal doubts."""
    import copy

    from dmlprof.render.html import render_html, report_data
    from session_kinds import sweep

    session = sweep()
    rows = [row(2 ** (3 + i), rate) for i, rate in enumerate((38.0, 617.0, 219.0, 836.0, 340.0, 348.0))]
    for noisy in rows[::2]:
        noisy["step_ms_p95"] = 5 * noisy["step_ms_p50"]
    session.sweep = dict(copy.deepcopy(session.sweep), rows=rows, recommended_batch_size=64,
                         knee_batch_size=None, memory_budget_bytes=None)
    data = report_data(session)
    assert data["verdict"]["tone"] == "warn" and "Noisy: step p95 over 2x p50 at batch sizes 8, 32, 128" in \
        data["verdict"]["detail"]
    assert data["sweep"]["noisy_note"].startswith("noisy:") and [r["noisy"] for r in data["sweep"]["rows"]] == [
        True, False, True, False, True, False]
    assert 'id="sweep-noisy"' in render_html(session)
    assert data["sweep"]["noisy_note"] in " ".join(render_sweep_text(session, width=300).split("\n"))


@pytest.mark.parametrize("flags, expected", [
    # the CPU: every size that ran says it cannot fall back; the size that crashed says nothing
    ({8: False, 16: False, 32: None}, False),
    # DirectML: a size that ran recorded its fallbacks; one that ran out of memory recorded nothing
    ({8: True, 16: True, 32: False}, True),
    # every size failed: nothing is known of the backend's fallbacks
    ({8: False, 16: False, 32: False}, None),
])
def test_whether_fallback_time_was_measured_comes_from_the_sizes_that_ran(flags, expected, model_file):
    from dmlprof.report import build_report

    failing = {32} if expected is not None else {8, 16, 32}

    def outcome(bs):
        base = row(bs, status="oom", error="out of memory") if bs in failing else row(bs, 100.0 * bs, peak=bs * GiB)
        return {**base, **({} if flags[bs] is None else {"fallback_recorded": flags[bs]})}

    sweep = build_report(run_sweep(model_file, "cpu", batch_sizes=[8, 16, 32],
                                   runner=fake_runner(outcome, [])).to_session()).sweep
    assert sweep.fallback_recorded is expected
    shares = [r.fallback_time_share for r in sweep.rows]
    assert shares == ([None] * 3 if expected is False else [0.0] * 3)


def test_a_recommendation_past_the_knee_says_why_beside_it():
    """'knee: 32' beside 'use 128' read as a contradiction: the knee note says how much faster the recommended size
    measured all the same."""
    from dmlprof.report.sweep import SweepReport, SweepRow

    def row(size, rate, recommended=False):
        return SweepRow(size, "ok", rate, 10.0, 11.0, None, "", None, None, None, True, False, recommended, size == 32)

    rows = (row(16, 100.0), row(32, 200.0), row(64, 201.0), row(128, 270.0, recommended=True))
    sweep = SweepReport(rows, 128, 32, None, 0.05, 1.5, (), None, ())
    assert sweep.knee_note.startswith("knee: 32 (past it")
    assert "128 is recommended all the same: +35% samples/s over 32" in sweep.knee_note
    at_knee = SweepReport((row(16, 100.0), row(32, 200.0, recommended=True), row(64, 201.0)), 32, 32, None, 0.05, 1.5, (), None, ())
    assert "all the same" not in at_knee.knee_note


@pytest.mark.parametrize("budget, drawn", [(3 * 2**20, True), (int(16.5 * 2**30), False)])
def test_the_memory_plot_is_scaled_to_the_peaks_not_a_far_budget(budget, drawn):
    """A 16.5 GiB budget beside MiB peaks flattened the curve: the plot keeps to the measurements and names the
    budget above it; a budget near the peaks is drawn as a line."""
    import dataclasses

    from dmlprof.render.sweep_plots import sweep_plots
    from dmlprof.report import build_report
    from session_kinds import KINDS

    sweep = dataclasses.replace(build_report(KINDS["sweep"]()).sweep, memory_budget_bytes=budget)
    memory = next(p for p in sweep_plots(sweep) if p["key"] == "memory")
    assert (memory["budget_y"] is not None) is drawn and bool(memory["budget_above"]) is not drawn
    highest = min(p["y"] for p in memory["points"])  # SVG y grows downwards: the highest point has the smallest y
    box = memory["box"]
    if drawn:
        assert memory["budget_y"] < highest  # the budget line lies above the peaks, on the same scale
    else:
        assert highest < box["top"] + 0.2 * (box["bottom"] - box["top"])  # the largest peak near the top
