"""A scanned script's exit handlers (``atexit.register``) run when the script ends, as under plain Python, before
dmlprof reads the device's abort note a last time and reports (issue 33, re-probe 6's Medium: an abort the
emulated device raised in a script's exit handler was missed, the handlers ran after dmlprof had reported)."""
from __future__ import annotations

import atexit

import pytest

pytestmark = pytest.mark.live  # the emulated device's C++ note builds against torch 2.4.1 too

ORDERED = """\
import atexit, sys, torch
log = open(sys.argv[1], "a")
atexit.register(lambda: log.write("first registered\\n") and log.flush())
@atexit.register
def second():
    log.write("second registered\\n"); log.flush()
def unregistered():
    log.write("unregistered\\n"); log.flush()
atexit.register(unregistered)
atexit.unregister(unregistered)
atexit.register(lambda: 1 / 0)  # an exception in an exit handler is printed, and the others still run
torch.ones(2) * 2
log.write("end of script\\n"); log.flush()
"""

ABORT_AT_EXIT = """\
import atexit, torch
device = torch.device("privateuseone", 0)
x = torch.randn(2, 8, device=device) * 2
def save_spectrum():  # on torch-directml the process ends here, after the script's last line
    try:
        torch.fft.rfft(x)
    except RuntimeError:
        torch.fft.rfft(x.cpu())
atexit.register(save_spectrum)
"""


def test_a_scripts_exit_handlers_run_once_when_it_ends_in_pythons_order(tmp_path, capsys):
    from dmlprof import runner
    from dmlprof.backends.cpu import CpuBackend

    script, log = tmp_path / "exits.py", tmp_path / "log.txt"
    script.write_text(ORDERED, encoding="utf-8")
    handlers_before = atexit._ncallbacks()
    backend = CpuBackend(0)
    backend.prepare()
    runner.scan(script, backend=backend, profiler=False, script_args=[str(log)])
    assert log.read_text(encoding="utf-8").splitlines() == ["end of script", "second registered", "first registered"]
    assert atexit._ncallbacks() == handlers_before  # none left for the process's own exit: each ran once
    assert "ZeroDivisionError" in capsys.readouterr().err


def test_an_abort_in_a_scripts_exit_handler_ends_the_run_with_exit_4(tmp_path, emulated_dml_backend):
    from dmlprof import runner

    script = tmp_path / "abort_at_exit.py"
    script.write_text(ABORT_AT_EXIT, encoding="utf-8")
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=emulated_dml_backend, profiler=False)
    assert stopped.value.exit_code == 4 and "ends the process" in str(stopped.value)
    failure = stopped.value.session.meta.device_failure
    assert failure is not None and failure.kind == "aborts" and failure.op.startswith("aten::_fft_r2c")
