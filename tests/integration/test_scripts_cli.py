"""Scripts as users run them: ``-m package.module``, and errors that point at the script's own line.

GIVEN a training script laid out as users lay them out (a package run with ``python -m``, relative imports)
WHEN dmlprof scans it
THEN it runs as Python would run it, and what goes wrong is one line naming the file and line to look at.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

TRAIN = """\
import sys
import torch
from .helpers import make_model
print("argv", sys.argv[1:], __name__)
model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def _package(folder: Path) -> None:
    (folder / "pkg").mkdir()
    (folder / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "pkg" / "helpers.py").write_text("import torch\n\ndef make_model():\n    return torch.nn.Linear(4, 2)\n",
                                               encoding="utf-8")
    (folder / "pkg" / "train.py").write_text(TRAIN, encoding="utf-8")


def test_a_module_of_a_package_runs_as_python_m_runs_it(cli, tmp_path):
    _package(tmp_path)
    result = cli("scan", "-m", "pkg.train", "--device", "cpu", "--warmup", "0", "--json", "r.json", "--", "--epochs", "5")
    assert result.returncode == 0, result.stderr
    assert "argv ['--epochs', '5'] __main__" in result.stdout  # its relative import worked, its argv is its own
    meta = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["meta"]
    assert meta["run_mode"] == "script" and meta["model_name"] == "pkg.train" and meta["steps"] == 3


@pytest.mark.parametrize("args, words", [(("-m", "pkg.nope"), "no module named pkg.nope"),
                                         (("-m", "pkg.train", "x.py"), "not both"),
                                         ((), "no model file or script given")])
def test_a_module_that_is_not_there_or_a_file_besides_is_one_line(cli, tmp_path, args, words):
    _package(tmp_path)
    result = cli("scan", *args)
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1 and words in lines[0] and "Traceback" not in result.stderr


CRASHES = """\
import torch
from helpers import check_batch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x = torch.randn(8, 4)
    loss = model(x).sum()
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 2:
        check_batch(x)
"""


def test_a_script_that_raises_names_the_file_and_line_that_raised(cli, tmp_path):
    (tmp_path / "helpers.py").write_text("def check_batch(x):\n    raise ValueError('bad batch')\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(CRASHES, encoding="utf-8")
    result = cli("scan", "train.py", "--device", "cpu")
    (line,) = result.stderr.splitlines()
    assert result.returncode == 3 and "train.py raised ValueError: bad batch (at helpers.py:2)" in line, line
    assert "partial session saved" in line


def test_an_op_that_fails_names_the_call_and_the_scripts_line(cli, tmp_path):
    (tmp_path / "train.py").write_text(CRASHES.replace("from helpers import check_batch", "")
                                       .replace("check_batch(x)", "x.view(3, 7)"), encoding="utf-8")
    result = cli("scan", "train.py", "--device", "cpu")
    (line,) = result.stderr.splitlines()
    assert result.returncode == 3 and "is invalid for input of size 32 (at aten::view, train.py:10)" in line, line


def test_a_script_that_fails_before_any_call_leaves_no_empty_session(cli, tmp_path):
    (tmp_path / "train.py").write_text("import torch\nimport no_such_module\n", encoding="utf-8")
    result = cli("scan", "train.py", "--device", "cpu")
    (line,) = result.stderr.splitlines()
    assert result.returncode == 3 and "No module named 'no_such_module' (at train.py:2)" in line, line
    assert "session" not in line and not list(tmp_path.glob("reports/*.session.json"))


def test_a_file_with_a_syntax_error_is_a_python_file_with_a_mistake_at_a_line(cli, tmp_path):
    (tmp_path / "train.py").write_text("import torch\n\nfor x in range(3)\n    print(x)\n", encoding="utf-8")
    result = cli("scan", "train.py", "--target", "dml")
    (line,) = result.stderr.splitlines()
    assert result.returncode == 2 and line.startswith("dmlprof: error: syntax error in train.py at line 3: ")
    assert "not a Python file" not in line


def test_a_trace_of_a_prediction_is_refused_before_the_scan(cli, tmp_path):
    from conftest import MODELS

    result = cli("scan", MODELS / "lenet5.py", "--target", "dml", "--trace", "t.json", "--tb", "tb")
    (line,) = result.stderr.splitlines()
    assert result.returncode == 2 and "--trace and --tb lay out each call's time" in line
    assert not (tmp_path / "reports").exists()  # refused before anything ran or was saved


def test_target_dml_on_a_script_says_first_that_it_runs_on_the_emulated_device(cli, tmp_path):
    (tmp_path / "train.py").write_text(CRASHES.replace("from helpers import check_batch", "")
                                       .replace("check_batch(x)", "pass"), encoding="utf-8")
    result = cli("scan", "train.py", "--target", "dml", "--warmup", "0", "--steps", "1")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == (
        "dmlprof: train.py is a script: --target dml runs it on the emulated DirectML device (torch-directml's "
        "kernels on the host CPU: its verdicts are the device's, its times the CPU's)")


def test_a_script_whose_steps_were_all_warm_up_is_told_so_not_that_it_ran_no_op(cli):
    from conftest import FIXTURES

    result = cli("scan", FIXTURES / "train_script.py", "--device", "cpu", "--warmup", "1", "--", "--epochs", "1")
    (line,) = result.stderr.splitlines()
    assert result.returncode == 2 and "took 1 optimizer step(s), all of them unrecorded warm-up (--warmup 1)" in line
    assert "--warmup 0" in line and "ran none" not in line


def test_a_contracts_batch_copy_is_not_attributed_to_the_console_script(tmp_path):
    """pip's console script (``<venv>/bin/dmlprof``) runs dmlprof; it is not the line that asked for the copy."""
    import subprocess
    import sys

    from conftest import MODELS

    launcher = tmp_path / "bin" / "dmlprof"
    launcher.parent.mkdir()
    launcher.write_text("import sys\nfrom dmlprof.cli import entry\nif __name__ == '__main__':\n    sys.exit(entry())\n",
                        encoding="utf-8")
    done = subprocess.run([sys.executable, str(launcher), "scan", str(MODELS / "lenet5.py"), "--target", "dml",
                           "--json", "r.json", "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    transfers = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["transfers"]
    assert any(t["transfer"] == "h2d" for t in transfers)
    assert not [source for t in transfers for source in t["sources"] if "bin/dmlprof" in source]


FINDS_ITS_FOLDER = """\
import os, sys, torch
def annotated(x: int): pass
print("file", __file__, "argv0", sys.argv[0], "annotations", annotated.__annotations__)
here = os.path.dirname(__file__)
os.chdir(os.path.dirname(here))
print("beside it", sorted(os.listdir(here)))
torch.ones(2).sum()
"""


def test_a_script_finds_its_own_folder_by_file_as_under_python_even_after_it_changes_folder(cli, tmp_path):
    # reprobe8: __file__ was the path as typed ("sub/train.py"): dirname '' , wrong once the script chdirs
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train.py").write_text(FINDS_ITS_FOLDER, encoding="utf-8")
    (tmp_path / "sub" / "data.txt").write_text("x", encoding="utf-8")
    result = cli("scan", "sub/train.py", "--device", "cpu", "--quiet")
    assert result.returncode == 0, result.stderr
    script = (tmp_path / "sub" / "train.py").resolve()
    # argv[0] as typed; annotations evaluated (dmlprof's `from __future__ import annotations` does not reach it)
    assert f"file {script} argv0 sub/train.py annotations {{'x': <class 'int'>}}" in result.stdout, result.stdout
    assert "beside it ['data.txt', 'train.py']" in result.stdout, result.stdout


HEARTBEAT = """\
import atexit, os, sys, threading, time, torch
from concurrent.futures import ThreadPoolExecutor
log = open("train.log", "w")  # never closed: python's shutdown flushes it
saver = ThreadPoolExecutor(1)  # a checkpoint saved in the background: shutdown lets it finish
atexit.register(lambda: open("atexit.txt", "w").write("ran"))
stop = threading.Event()
heartbeat = threading.Thread(target=stop.wait)  # not a daemon: the script ends it at its end
heartbeat.start()
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    model(torch.randn(2, 4)).sum().backward(); optimizer.step(); optimizer.zero_grad()
    log.write(f"step {step}\\n")
    saver.submit(lambda at=step: (time.sleep(0.2), open(f"saved{at}.txt", "w").close()))
    if sys.argv[1:] == ["os._exit"] and step == 1:
        os._exit(0)  # as plain python: no thread waited for, no atexit handler
stop.set(); heartbeat.join()
"""


@pytest.mark.parametrize("how", ["stopped", "os._exit"])
def test_a_script_cut_short_with_a_thread_of_its_own_running_ends_the_scan(cli, tmp_path, how):
    # reprobe8: the scan printed its report, then waited forever for the script's heartbeat thread (which the
    # script's end, never reached, would stop); a script's os._exit ran its atexit handlers under dmlprof
    (tmp_path / "train.py").write_text(HEARTBEAT, encoding="utf-8")
    result = cli("scan", "train.py", "--device", "cpu", "--quiet", "--no-profiler", "--", how, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "session saved" in result.stdout + result.stderr
    written = (tmp_path / "train.log").read_text(encoding="utf-8").splitlines()
    if how == "stopped":  # what the script wrote reached its file, as python's shutdown would have flushed it
        assert written[:2] == ["step 0", "step 1"]
        assert sorted(path.name for path in tmp_path.glob("saved*.txt"))[:2] == ["saved0.txt", "saved1.txt"]
        assert (tmp_path / "atexit.txt").exists()
    else:  # as plain python: os._exit flushes nothing and runs no atexit handler
        assert written == [] and not (tmp_path / "atexit.txt").exists()
