"""Progress bars of the real CLI: on stderr under a terminal, never in a pipe, off with --quiet / --no-progress."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest

from conftest import MODELS, run_cli

pytestmark = pytest.mark.live

LENET = (str(MODELS / "lenet5.py"), "--device", "cpu", "--steps", "2", "--warmup", "1", "--batch-size", "4")
needs_pty = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals (pty) are POSIX-only; the code "
                               "under test needs none, only this way of giving it a terminal does")


def run_in_terminal(*args, cwd) -> tuple:
    """``python -m dmlprof ARGS`` with stderr on a pseudo-terminal: (exit code, stdout, what the terminal showed)."""
    import pty

    master, slave = pty.openpty()
    shown = []

    def read():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the last writer closed its end
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    child = subprocess.run([sys.executable, "-m", "dmlprof", *map(str, args)], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=slave, stdin=subprocess.DEVNULL, timeout=600)
    os.close(slave)
    reader.join(10)
    os.close(master)
    return child.returncode, child.stdout.decode("utf-8"), b"".join(shown).decode("utf-8", "replace")


def labels(terminal_text: str) -> list:
    """The bars' labels in the order they were drawn, each once (``steps: 50%|...`` -> ``steps``)."""
    seen = []
    for line in re.split(r"[\r\n]", terminal_text):
        match = re.match(r"([a-z][\w ,/-]*): ", line)
        if match and match.group(1) not in seen:
            seen.append(match.group(1))
    return seen


def test_no_bar_when_stderr_is_a_pipe(tmp_path):
    result = run_cli("scan", *LENET, "--out", "runs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("dmlprof live scan of lenet5")
    assert "warm-up" not in result.stderr and "step/s" not in result.stderr and "%|" not in result.stderr
    assert "\r" not in result.stderr


@needs_pty
def test_a_scan_in_a_terminal_shows_its_phases_and_leaves_the_line_clean(tmp_path):
    code, stdout, terminal = run_in_terminal("scan", *LENET, "--out", "runs", cwd=tmp_path)
    assert code == 0, terminal
    assert labels(terminal) == ["warm-up", "steps", "processing the trace"], terminal
    assert "2/2" in terminal and "1/1" in terminal  # the step counts
    assert terminal.endswith("\r") and terminal.split("\r")[-2].strip() == ""  # the last bar was wiped
    assert stdout.startswith("dmlprof live scan of lenet5")  # the report itself is untouched, on stdout


@needs_pty
@pytest.mark.parametrize("flag", ["--quiet", "--no-progress"])
def test_quiet_and_no_progress_turn_the_bars_off_in_a_terminal(tmp_path, flag):
    code, stdout, terminal = run_in_terminal("scan", *LENET, "--out", "runs", flag, cwd=tmp_path)
    assert code == 0, terminal
    assert labels(terminal) == [] and "%|" not in terminal, terminal
    assert "session saved to" in stdout + terminal  # the run itself happened


@needs_pty
def test_replace_names_each_of_its_two_scans(tmp_path):
    code, _stdout, terminal = run_in_terminal("scan", *LENET, "--out", "runs", "--replace", cwd=tmp_path)
    assert code == 0, terminal
    assert labels(terminal) == ["plain scan, warm-up", "plain scan, steps", "plain scan, processing the trace",
                                "patched scan, warm-up", "patched scan, steps",
                                "patched scan, processing the trace"], terminal


@needs_pty
def test_verify_and_a_script_show_their_steps(tmp_path):
    code, _stdout, terminal = run_in_terminal("scan", *LENET, "--out", "runs", "--verify", cwd=tmp_path)
    assert code == 0, terminal
    assert "verified steps" in labels(terminal), terminal
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                      "for _ in range(20):\n    model(torch.randn(3, 4)).sum().backward()\n"
                      "    opt.step(); opt.zero_grad()\n", encoding="utf-8")
    code, _stdout, terminal = run_in_terminal("scan", "train.py", "--device", "cpu", "--steps", "2", "--out", "runs",
                                              cwd=tmp_path)
    assert code == 0, terminal
    assert labels(terminal)[0] == "optimizer steps" and "3/3" in terminal, terminal


@needs_pty
def test_check_and_sweep_show_bars_unless_told_not_to(tmp_path):
    check = ("check", MODELS / "lenet5.py", "--target", "dml")  # on the CPU a check cannot fail: it is refused
    code, _stdout, terminal = run_in_terminal(*check, "--out", "runs", cwd=tmp_path)
    assert code == 0, terminal
    assert "steps" in labels(terminal), terminal  # check prints no report, yet shows its progress
    code, _stdout, terminal = run_in_terminal(*check, "--out", "runs", "--no-progress", cwd=tmp_path)
    assert code == 0 and labels(terminal) == [], terminal
    sweep = ("sweep", MODELS / "lenet5.py", "--device", "cpu", "--batch-sizes", "2", "--steps", "1", "--warmup", "0",
             "--out", "runs")
    code, _stdout, terminal = run_in_terminal(*sweep, cwd=tmp_path)
    assert code == 0, terminal
    assert labels(terminal) == ["batch sizes"] and "1/1" in terminal and "bs=2: ok" in terminal, terminal
    code, _stdout, terminal = run_in_terminal(*sweep, "--no-progress", cwd=tmp_path)
    assert code == 0 and labels(terminal) == [], terminal
