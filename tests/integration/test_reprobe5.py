"""A fresh probe of the journal, --confirm and the new targets (issue 33): the defects it found.

GIVEN a realistic script a user scans (DataLoader workers, torch.compile, a crash while the session is saved)
WHEN  ``dmlprof scan`` runs it
THEN  dmlprof changes nothing the script does, and what it says about the run is so.
"""
from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow]

SPAWNING_SCRIPT = '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import torch_directml

device = torch_directml.device()  # at the top, as scripts write it: a spawned worker runs this line too

if __name__ == "__main__":
    data = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn")
    model = nn.Linear(8, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, target in loader:
        loss = nn.functional.cross_entropy(model(inputs.to(device)), target.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    import os, sys
    assert os.path.samefile(sys.path[0], os.path.dirname(os.path.abspath(__file__))), sys.path[:2]  # still its own
    print("trained on", torch_directml.device_name())
'''


def test_a_script_whose_dataloader_spawns_workers_runs_on_the_stand_in_device_as_on_directml(tmp_path):
    # On DirectML (torch-directml installed) a spawned worker imports the script again, torch_directml with it,
    # and runs; without torch-directml installed its import failed in the worker: the scan said the script
    # failed ("DataLoader worker exited unexpectedly", exit 3) where it trains. spawn is the default on
    # Windows and macOS.
    (tmp_path / "train.py").write_text(SPAWNING_SCRIPT, encoding="utf-8")
    done = run_cli("scan", "train.py", "--target", "dml", "--run-to-end", "--no-progress", "--json", "report.json",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No module named 'torch_directml'" not in done.stderr
    assert "trained on" in done.stdout
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert not report["meta"].get("partial")


def test_the_re_render_command_of_a_session_under_a_folder_with_spaces_is_one_word(tmp_path):
    # "re-render it: dmlprof report dir with spaces/x.session.json", pasted into a shell, gave three arguments
    import shlex

    (tmp_path / "net.py").write_text(
        "import torch\nfrom torch import nn\n\ndef build_model():\n    return nn.Linear(8, 2)\n\n"
        "def make_batch(batch_size):\n    return torch.randn(batch_size, 8), torch.randint(0, 2, (batch_size,))\n",
        encoding="utf-8")
    done = run_cli("scan", "net.py", "--device", "cpu", "--steps", "1", "--no-progress", "--out", "my reports",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (command,) = [line.split("re-render it: ", 1)[1] for line in done.stdout.splitlines() if "re-render it:" in line]
    words = shlex.split(command, posix=sys.platform != "win32")
    assert words[:2] == ["dmlprof", "report"] and len(words) == 3, command
    again = run_cli(*words[1:], cwd=tmp_path)
    assert again.returncode == 0 and "scan of net" in again.stdout, again.stderr


COMPILED_SCRIPT = '''
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
compiled = torch.compile(model, backend="eager")  # Dynamo's tracing without a compiler: seconds, not minutes
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = compiled(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
'''


@pytest.mark.live
def test_a_script_that_uses_torch_compile_trains_under_dmlprof_as_without_it(tmp_path):
    # Plain python runs it (rc 0); under dmlprof scan on torch 2.13 it raised InternalTorchDynamoError at the
    # compiled model's first call: exit 3, "the model failed", for a script that trains.
    (tmp_path / "train.py").write_text(COMPILED_SCRIPT, encoding="utf-8")
    done = run_cli("scan", "train.py", "--device", "cpu", "--run-to-end", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loss" in done.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_script_that_changes_its_umask_does_not_change_the_output_folder_dmlprof_makes(tmp_path):
    # os.umask(0o277) in the script (its own files private and read-only) made --out a folder its owner could
    # not write into (d-r-x------): the session, saved after the script, was lost for any user but root
    (tmp_path / "train.py").write_text(
        "import os\nimport torch\nos.umask(0o277)\nx = torch.ones(3)\nfor _ in range(3):\n    x = x * 2\n",
        encoding="utf-8")
    done = run_cli("scan", "train.py", "--device", "cpu", "--no-progress", "--out", "out/sessions", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for folder in (tmp_path / "out", tmp_path / "out" / "sessions"):
        assert folder.stat().st_mode & 0o700 == 0o700, oct(folder.stat().st_mode)
    assert list((tmp_path / "out" / "sessions").glob("*.session.json"))


LAZY_SCRIPT = '''
import torch
from torch import nn

model = nn.Sequential(nn.Flatten(), nn.LazyLinear(2)).to(torch.float64)  # before its first forward
model(torch.randn(2, 3, dtype=torch.float64))  # the lazy layer takes its shape, as its documentation asks
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = model(torch.randn(2, 3, dtype=torch.float64)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("trained", loss.item())
'''


@pytest.mark.xfail(strict=True, reason="open (reprobe5): the recorder reads .shape of an UninitializedParameter "
                                       "(a LazyLinear cast or moved before its first forward), which raises; reading "
                                       "it below torch_function then left the layer's weight initialised empty "
                                       "(in_features 0): the subclass's _to_copy result is not kept either")
def test_a_model_with_a_lazy_layer_cast_before_its_first_forward_trains_under_dmlprof(tmp_path):
    # plain torch runs it (CPU; .to("cuda") takes the same path); under dmlprof .to(torch.float64) raised "Can't
    # access the shape of an uninitialized parameter": exit 3, "the model failed". (On real torch-directml 0.2.5
    # a lazy layer moved to the device before its first forward fails by itself: "mat2 must be a matrix".)
    (tmp_path / "train.py").write_text(LAZY_SCRIPT, encoding="utf-8")
    done = run_cli("scan", "train.py", "--device", "cpu", "--run-to-end", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained" in done.stdout


SILENCED_SCRIPT = '''
import warnings
warnings.filterwarnings("ignore")  # as many training scripts start
import torch
from torch import nn
import torch_directml

device = torch_directml.device()
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.ReLU()).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = model(torch.randn(2, 3, 8, 8).to(device)).pow(2).mean()
    optimizer.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # and silence a noisy call again
        loss.backward()
    optimizer.step()
'''


def _fell_back_when_scanned(script: str, folder) -> set:
    """The ops the scan of ``script`` on the emulated device found falling back (it must end well)."""
    (folder / "train.py").write_text(script, encoding="utf-8")
    done = run_cli("scan", "train.py", "--device", "emulated-dml", "--no-progress", "--out", "out", cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = (folder / "out").glob("*.session.json")
    ops = json.loads(path.read_text(encoding="utf-8"))["ops"]
    return {op for op, verdict in zip(ops["op"], ops["verdict"]) if verdict == "fallback"}


def test_a_script_that_silences_warnings_still_has_its_fallbacks_found(tmp_path):
    # The fallbacks are judged by the warnings each call raises; a script's own "ignore" filter, set after the
    # recording began, stood in front of dmlprof's: GroupNorm's backward, which falls back on DirectML, was
    # reported on the device ("0 fell back to the CPU"), and check passed
    assert "aten::native_group_norm_backward" in _fell_back_when_scanned(SILENCED_SCRIPT, tmp_path)


def test_a_script_that_turns_warnings_into_errors_still_gets_its_error_under_dmlprof(tmp_path):
    # keeping dmlprof's capture in front must not swallow what the script asked for: "error" raises at the
    # first fallback, as without dmlprof
    script = SILENCED_SCRIPT.replace('warnings.filterwarnings("ignore")', 'warnings.filterwarnings("error")')
    script = script.replace('warnings.simplefilter("ignore")', 'pass')
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    done = run_cli("scan", "train.py", "--device", "emulated-dml", "--no-progress", "--out", "out", cwd=tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "raised UserWarning" in done.stderr and "native_group_norm_backward" in done.stderr


def test_a_script_that_turns_torch_warn_always_off_still_has_its_fallbacks_found(tmp_path):
    # torch.set_warn_always(False) made a backend's fallback warn once per process: the recorded steps, after a
    # warm-up that had warned, read every GroupNorm backward as on the device
    script = SILENCED_SCRIPT.replace('warnings.filterwarnings("ignore")', 'pass')
    script = script.replace("import torch_directml\n", "import torch_directml\ntorch.set_warn_always(False)\n")
    assert "set_warn_always(False)" in script
    assert "aten::native_group_norm_backward" in _fell_back_when_scanned(script, tmp_path)


def test_a_script_that_sends_warnings_to_logging_still_has_its_fallbacks_found(tmp_path):
    # logging.captureWarnings(True) (frameworks call it) replaced warnings.showwarning, the capture's hook
    script = SILENCED_SCRIPT.replace('warnings.filterwarnings("ignore")',
                                     "import logging\nlogging.captureWarnings(True)")
    script = script.replace('warnings.simplefilter("ignore")', "pass")
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    done = run_cli("scan", "train.py", "--device", "emulated-dml", "--no-progress", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = (tmp_path / "out").glob("*.session.json")
    ops = json.loads(path.read_text(encoding="utf-8"))["ops"]
    assert "fallback" in {verdict for op, verdict in zip(ops["op"], ops["verdict"])
                          if op == "aten::native_group_norm_backward"}, done.stdout[-3000:]
