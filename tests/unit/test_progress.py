"""Progress bars: silent unless the CLI asks, drawn only on a terminal, one call a step, clean when done."""
from __future__ import annotations

import io
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from dmlprof import progress

# not from conftest: collected after tests/realdml, whose conftest.py then answers 'import conftest'
MODELS = Path(__file__).resolve().parents[2] / "models"


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal (without a size: the fallback size is used)."""

    def __init__(self, encoding: str = "utf-8"):
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self):
        return self._encoding

    def isatty(self):
        super().isatty()  # a closed stream raises, as a real one does
        return True


class Tally(progress.Reporter):
    """Counts what the code under test reports: phases opened (name, total) and advances per phase."""

    def __init__(self):
        self.phases, self.advances, self.stages = [], {}, []

    @contextmanager
    def phase(self, name, total=None, unit="step"):
        self.phases.append((name, total))
        self.advances.setdefault(name, 0)
        tally = self

        class Counted(progress.Phase):
            def advance(self, steps=1):
                tally.advances[name] += steps

        yield Counted()

    @contextmanager
    def stage(self, name):
        self.stages.append(name)
        yield


def segments(text: str) -> list:
    """What a terminal showed, redraw by redraw (tqdm redraws a line after each carriage return)."""
    return [part for part in text.replace("\n", "\r").split("\r") if part.strip()]


def test_nothing_is_drawn_unless_asked_even_on_a_terminal(monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress.phase("warm-up", total=2) as bar:
        bar.advance()
        bar.describe("bs=8 running")
    assert terminal.getvalue() == ""


def test_bars_are_wanted_only_when_asked_for_and_on_a_terminal():
    assert progress.wanted(FakeTerminal()) is True
    assert progress.wanted(FakeTerminal(), requested=False) is False
    assert progress.wanted(io.StringIO()) is False  # a pipe, a file, a CI log
    assert progress.wanted(None) is False  # pythonw: no stderr at all
    closed = FakeTerminal()
    closed.close()
    assert progress.wanted(closed) is False


def test_shown_draws_each_phase_and_leaves_a_clean_line():
    terminal = FakeTerminal()
    with progress.shown(terminal) as drawing:
        with progress.phase("warm-up", total=2) as bar:
            bar.advance()
            bar.advance()
    text = terminal.getvalue()
    assert drawing is True
    assert any(s.startswith("warm-up:") and "2/2" in s for s in segments(text)), text
    # the last thing drawn is the bar's line blanked out, and the cursor back at its start
    last = text.split("\r")[-2]
    assert text.endswith("\r") and last.strip() == "" and len(last) >= len("warm-up: 100%")


def test_not_shown_off_a_terminal():
    stream = io.StringIO()
    with progress.shown(stream) as drawing:
        with progress.phase("steps", total=3) as bar:
            bar.advance()
    assert drawing is False and stream.getvalue() == ""


def test_a_stage_prefixes_its_phases_and_an_inner_phase_takes_the_line():
    terminal = FakeTerminal()
    with progress.shown(terminal):
        with progress.stage("patched scan"):
            with progress.phase("steps", total=2) as outer:
                outer.advance()
                with progress.phase("processing the trace"):
                    pass
                outer.advance()
    shown = segments(terminal.getvalue())
    labels = [s.split(":")[0] for s in shown]
    assert "patched scan, steps" in labels and "patched scan, processing the trace" in labels
    inner = labels.index("patched scan, processing the trace")
    # the outer bar is drawn again after the inner one ends, then finishes
    assert "patched scan, steps" in labels[inner + 1:]
    assert "\x1b[" not in terminal.getvalue()  # one line, no cursor movement (old Windows consoles)


def test_a_console_that_cannot_encode_blocks_gets_an_ascii_bar():
    cp1252 = FakeTerminal(encoding="cp1252")
    utf8 = FakeTerminal(encoding="utf-8")
    for terminal in (cp1252, utf8):
        with progress.shown(terminal):
            with progress.phase("steps", total=4) as bar:
                bar.advance(2)
    cp1252.getvalue().encode("cp1252")  # every character drawn fits the console
    assert "\u2588" not in cp1252.getvalue() and "#" in cp1252.getvalue()
    assert "\u2588" in utf8.getvalue()
    assert progress.ascii_only(cp1252) and not progress.ascii_only(utf8)


def test_off_silences_bars_inside_a_shown_block():
    terminal = FakeTerminal()
    with progress.shown(terminal):
        with progress.off():
            with progress.phase("batch sizes", total=2) as bar:
                bar.advance()
    assert terminal.getvalue() == ""


def test_another_thread_draws_nothing_unless_given_bars():
    def work():
        with progress.phase("steps", total=1) as bar:
            bar.advance()

    terminal = FakeTerminal()
    with progress.shown(terminal):
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
    assert terminal.getvalue() == ""


def test_an_open_ended_phase_redraws_its_clock_while_nothing_advances():
    terminal = FakeTerminal()
    with progress.shown(terminal):
        with progress.phase("processing the trace"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "00:01" not in terminal.getvalue():
                time.sleep(0.1)
    assert "processing the trace: 00:01" in terminal.getvalue()


def test_a_followed_phase_shows_what_it_follows_at_each_redraw_of_its_clock(monkeypatch):
    monkeypatch.setattr(progress, "TICK_S", 0.02)
    terminal, count = FakeTerminal(), [0]
    with progress.shown(terminal):
        with progress.phase("warm-up", total=1) as bar:
            bar.follow(lambda: f"{count[0]} calls")
            count[0] = 412
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "412 calls" not in terminal.getvalue():
                time.sleep(0.02)
    drawn = segments(terminal.getvalue())
    assert any(s.startswith("warm-up: 0/1 [") and s.rstrip().endswith(", 412 calls]") for s in drawn), drawn
    assert all(len(s) <= progress.FALLBACK_SIZE[0] for s in drawn)


# -- what the runner and the sweep report --------------------------------------------
def test_a_scan_reports_one_advance_a_step_in_named_phases():
    import dmlprof

    tally = Tally()
    with progress.using(tally):
        session = dmlprof.scan(MODELS / "lenet5.py", "cpu", steps=2, warmup=1, batch_size=2)
    assert session.meta.steps == 2
    assert tally.phases == [("warm-up", 1), ("steps", 2), ("processing the trace", None)]
    # one call a step, never one an op (the step has dozens of op calls)
    assert tally.advances == {"warm-up": 1, "steps": 2, "processing the trace": 0}


def test_a_verified_scan_names_its_steps_so(tmp_path):
    import dmlprof

    tally = Tally()
    with progress.using(tally):
        dmlprof.scan(MODELS / "lenet5.py", "cpu", steps=1, warmup=0, batch_size=2, profiler=False, verify=True)
    assert tally.phases == [("verified steps", 1), ("processing the calls", None)]  # no warm-up: no bar


def test_a_script_counts_its_optimizer_steps(tmp_path):
    import dmlprof

    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "model = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(10):\n"
        "    model(torch.randn(3, 4)).sum().backward()\n"
        "    opt.step(); opt.zero_grad()\n", encoding="utf-8")
    tally = Tally()
    with progress.using(tally):
        dmlprof.scan(script, "cpu", steps=2, warmup=1)
    assert ("optimizer steps", 3) in tally.phases
    assert tally.advances["optimizer steps"] == 3  # the script is stopped after warm-up + steps


def test_the_sweep_counts_sizes_and_says_how_each_went(tmp_path, monkeypatch):
    from dmlprof.sweep.driver import run_sweep

    model = tmp_path / "net.py"
    model.write_text("import torch\ndef build_model():\n    return torch.nn.Linear(2, 2)\n"
                     "def make_batch(n):\n    return torch.randn(n, 2), torch.randn(n, 2)\n", encoding="utf-8")

    def runner(argv, batch_size, timeout_s, tick=None):
        tick()
        return {"batch_size": batch_size, "status": "ok", "samples_per_s": 100.0 * batch_size,
                "step_time_ms": 10.0, "peak_memory_bytes": 1000}

    terminal = FakeTerminal()
    with progress.shown(terminal):
        run_sweep(model, "cpu", batch_sizes=[8, 16], runner=runner)
    shown = segments(terminal.getvalue())
    assert any(s.startswith("batch sizes:") and "1/2" in s and "bs=8: ok 800 samples/s" in s for s in shown), shown
    assert any("2/2" in s for s in shown)
    assert any("size/s" in s for s in shown) and not any("step/s" in s for s in shown)  # it counts sizes
    quiet = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    run_sweep(model, "cpu", batch_sizes=[8], runner=runner)  # the library alone draws nothing
    assert quiet.getvalue() == ""


def test_a_message_during_a_bar_gets_its_own_line_and_the_bar_comes_back(capsys):
    terminal = FakeTerminal()
    with progress.shown(terminal):
        with progress.phase("steps", total=2) as bar:
            bar.advance()
            progress.say("dmlprof: interrupted; saving")
    before, after = terminal.getvalue().split("dmlprof: interrupted; saving\n")
    assert before.split("\r")[-1] == ""  # the bar's line was wiped first: the message starts a clean line
    assert "steps:" in after and "1/2" in after  # then the bar is drawn again below it
    progress.say("no bars: plain stderr")
    assert capsys.readouterr().err == "no bars: plain stderr\n"


def test_the_emulated_devices_first_build_is_a_phase_of_its_own(tmp_path):
    """Compiling the emulated device takes 20 s to minutes: the bars say so, with a clock, instead of a silent wait."""
    from dmlprof import testing

    tally = Tally()
    with progress.using(tally):
        with testing.build_shown(tmp_path):  # nothing built there yet
            pass
        (tmp_path / f"{testing.EXTENSION_NAME}{'.pyd' if sys.platform == 'win32' else '.so'}").write_bytes(b"")
        with testing.build_shown(tmp_path):  # built: loading it is quick, no phase
            pass
    assert tally.phases == [(testing.BUILD_PHASE, None)]
    assert "building the emulated DirectML device" in testing.BUILD_PHASE


def test_off_a_terminal_the_first_build_is_one_line_in_the_log(tmp_path, capsys):
    """A CI log draws no bars: the build's 20 s to minutes still start with a line saying what is happening;
    --quiet, --no-progress and the Python API print nothing."""
    import io

    from dmlprof import testing

    log = io.StringIO()  # not a terminal
    with progress.shown(log):
        with testing.build_shown(tmp_path):
            pass
    assert log.getvalue() == f"dmlprof: {testing.BUILD_PHASE} ...\n"
    with progress.shown(log, requested=False):  # --quiet, --no-progress
        with testing.build_shown(tmp_path):
            pass
    with testing.build_shown(tmp_path):  # the Python API
        pass
    assert log.getvalue().count("\n") == 1 and capsys.readouterr().err == ""
    (tmp_path / f"{testing.EXTENSION_NAME}{'.pyd' if sys.platform == 'win32' else '.so'}").write_bytes(b"")
    with progress.shown(log):
        with testing.build_shown(tmp_path):  # built: nothing to note
            pass
    assert log.getvalue().count("\n") == 1


def test_what_the_profiler_holds_back_keeps_messages_and_drops_progress_redraws(capfd):
    """While torch.profiler starts and stops, fd 2 is held to drop Kineto's chatter; a progress bar its clock
    thread redrew meanwhile must not come out afterwards as a line of its own (it stayed on screen, twice)."""
    import os

    from dmlprof.record.profiler import quiet_native_stderr

    with quiet_native_stderr():
        os.write(2, b"STAGE:2026-12-02 profiler_start\n")
        os.write(2, b"a message of the model\r\n")  # as Windows ends a line
        os.write(2, b"\rscan: 00:00\r            \rsaid above the bar\n")  # progress.say(): bar cleared first
        os.write(2, b"\rscan, processing the trace: 00:01")
    err = capfd.readouterr().err
    assert err == "a message of the model\nsaid above the bar\n"


SLOW_STEP_MODEL = """
import time
import torch


class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        out = self.fc(x)
        time.sleep(0.4)  # a first step that runs long, as real DirectML's does while its shaders compile
        return out


def build_model():
    return Slow()


def make_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)


def loss_fn(out, target):
    return ((out - target) ** 2).mean()
"""


@pytest.mark.parametrize("warmup, phase", [(1, "warm-up"), (0, "steps")])
def test_a_long_first_step_shows_the_calls_it_has_made_while_it_runs(tmp_path, monkeypatch, warmup, phase):
    # GIVEN a step that runs long and a terminal; WHEN it is scanned; THEN the step's bar counts its calls
    # while it runs (the step counter alone reads 0/1 until the step ends: minutes on real DirectML)
    import dmlprof

    monkeypatch.setattr(progress, "TICK_S", 0.02)
    model = tmp_path / "slow.py"
    model.write_text(SLOW_STEP_MODEL, encoding="utf-8")
    terminal = FakeTerminal()
    with progress.shown(terminal):
        dmlprof.scan(model, "cpu", steps=1, warmup=warmup, batch_size=2, profiler=False)
    counted = [s for s in segments(terminal.getvalue()) if s.startswith(f"{phase}: 0/1 [") and " calls" in s]
    assert counted, terminal.getvalue()
    assert any(s.rstrip().endswith(" calls]") and not s.rstrip().endswith(" 0 calls]") for s in counted), counted


def test_the_backends_note_on_a_long_first_step_is_shown_until_a_step_has_ended():
    from dmlprof.backends.cpu import CpuBackend
    from dmlprof.backends.dml import DmlBackend
    from dmlprof.runner.run import Run, StepCalls

    assert DmlBackend.first_step_note and not CpuBackend.first_step_note

    class Noted(CpuBackend):
        first_step_note = "first calls compile shaders"

    shown = []

    class Followed(progress.Phase):
        def follow(self, text):
            shown.append(text)

    run = Run(Path("m.py"), Noted(), sync=True, profiler=False, run_mode="contract")
    total = [3]
    run._follow_calls(Followed(), StepCalls(lambda: total[0]))
    assert shown[0]() == "3 calls (first calls compile shaders)"
    run.steps_ended = 1
    total[0] = 1250
    assert shown[0]() == "1,250 calls"
