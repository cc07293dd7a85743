"""Shared test helpers: run the real CLI in a subprocess, find the repo's files."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "models"
FIXTURES = REPO / "tests" / "fixtures"
UNIT = REPO / "tests" / "unit"


def pytest_collection_modifyitems(config, items):
    """Every unit test not marked ``slow`` is part of the quick subset (``pytest -m quick``, README: an install
    checked in minutes), beside the few end-to-end tests marked ``quick`` that check an install: the CLI, a
    prediction, the emulated device's build. A unit test marked ``slow`` (tens of seconds: scans in subprocesses,
    whole tables) runs with the full suite only."""
    for item in items:
        if UNIT in Path(str(item.fspath)).parents and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.quick)


#: outcomes of a module run in a process of its own, by test id (see :func:`pytest_pyfunc_call`)
_OWN_PROCESS_OUTCOMES: dict = {}


def _emulated_device_loaded() -> bool:
    testing = sys.modules.get("dmlprof.testing")
    return testing is not None and testing.is_loaded()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked ``own_process`` predicts a target whose stand-in device cannot share a process with the
    emulated DirectML device (dmlprof refuses it, docs/targets.md). Where an earlier test of this process loaded
    that device, the test's module runs once in a process of its own and each test reports its outcome there."""
    if pyfuncitem.get_closest_marker("own_process") is None or not _emulated_device_loaded():
        return None
    module = str(Path(str(pyfuncitem.fspath)).relative_to(REPO).as_posix())
    if module not in _OWN_PROCESS_OUTCOMES:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", module],
                              cwd=REPO, capture_output=True, text=True, encoding="utf-8", timeout=1800)
        outcomes = {}
        for line in done.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"):
                outcomes[rest.split(" - ")[0].strip()] = word
        _OWN_PROCESS_OUTCOMES[module] = (outcomes, done.stdout[-4000:])
    outcomes, said = _OWN_PROCESS_OUTCOMES[module]
    assert outcomes.get(pyfuncitem.nodeid) == "PASSED", f"in a process of its own: {outcomes.get(pyfuncitem.nodeid)}\n{said}"
    return True


def run_cli(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    """``python -m dmlprof ARGS`` as a user would run it; never raises on a non-zero exit."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONIOENCODING", "utf-8")
    return subprocess.run(
        [sys.executable, "-m", "dmlprof", *map(str, args)],
        cwd=cwd, env=full_env, capture_output=True, text=True, encoding="utf-8", timeout=timeout,
    )


#: set where Chromium is installed for the tests (CI): a browser test that cannot find it fails instead of skipping
BROWSER_STRICT_ENV = "DMLPROF_BROWSER_STRICT"


def require_chromium() -> None:
    """Skip, saying why in pytest's summary, where Chromium or chromedriver is missing (a fresh machine:
    the rest of the suite still checks the install); fail instead where DMLPROF_BROWSER_STRICT is set."""
    import shutil

    missing = [name for name, found in (
        ("Chromium", shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")),
        ("chromedriver", shutil.which("chromedriver"))) if not found]
    if not missing:
        return
    reason = (f"{' and '.join(missing)} not installed: the HTML report's browser tests need them "
              "(apt-get install chromium chromium-driver; .ci/run does it)")
    if os.environ.get(BROWSER_STRICT_ENV):
        pytest.fail(f"{reason}; {BROWSER_STRICT_ENV} is set")
    pytest.skip(reason)


def _stopping_signals_as_by_default() -> None:
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


#: Popen arguments for a child that a test sends Ctrl-C, SIGTERM or SIGHUP to. A shell's background job
#: (``pytest &`` without job control) ignores SIGINT, a runner started under ``nohup`` ignores SIGHUP, and
#: ignoring survives exec into every child, where dmlprof leaves it ignored as asked: such a test would then
#: measure how its runner was started (a lost signal, a script left running to its end).
SIGNALS_REACH = {"preexec_fn": _stopping_signals_as_by_default} if os.name == "posix" else {}


@pytest.fixture
def cli(tmp_path):
    """Run the CLI with the working directory in a fresh temporary folder."""
    def _run(*args, **kwargs):
        kwargs.setdefault("cwd", tmp_path)
        return run_cli(*args, **kwargs)

    return _run


_LINEAR_MODEL_FILE = """
import torch
from torch import nn

BATCH_SIZE = 2

class Net(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x):
{forward}

def build_model():
    return Net()

def make_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 4)

def loss_fn(out, batch):
    return ((out - batch[1]) ** 2).mean()
{extra}
"""


@pytest.fixture
def linear_model_file(tmp_path):
    """``write(forward, init=..., extra=..., name=...)``: the path of a model file whose ``Net`` takes (N, 4) to
    (N, 4) by ``forward`` (its body, unindented), with ``self.fc = nn.Linear(4, 4)`` unless ``init`` says otherwise,
    a squared-error loss, and ``extra`` code at its end."""
    def write(forward: str, init: str = "self.fc = nn.Linear(4, 4)", extra: str = "", name: str = "net.py") -> str:
        path = tmp_path / name
        path.write_text(_LINEAR_MODEL_FILE.format(init=textwrap.indent(textwrap.dedent(init).strip(), " " * 8),
                                                  forward=textwrap.indent(textwrap.dedent(forward).strip(), " " * 8),
                                                  extra=textwrap.dedent(extra)), encoding="utf-8")
        return str(path)

    return write


@pytest.fixture(scope="session")
def emulated_dml_backend():
    """The emulated DirectML backend, built, loaded, and able to run backward in this process."""
    import torch

    from dmlprof.backends import backend_class

    cls = backend_class("emulated-dml")
    status = cls.availability()
    if not status.available:
        pytest.fail(f"the emulated DML device must build here: {status.reason}")
    backend = cls(0)
    backend.prepare()
    try:  # backward on the device needs it loaded before this process's first backward
        (torch.ones(2, device=backend.device(), requires_grad=True) * 2).sum().backward()
    except RuntimeError as exc:
        pytest.fail("backward on the emulated device fails in this process (it was loaded after the autograd "
                    f"engine started; run these tests first or alone): {str(exc).splitlines()[0][:120]}")
    return backend
