"""Reliability and security, round 4 (issue 33), below the CLI.

Each test names the defect it keeps out (R29, R32, ...).
"""
from __future__ import annotations

import sys

import pytest

POSIX = sys.platform != "win32"


# -- R29: a refusal the script catches does not let it train on --------------------------------------------------
def _refusing_cpu_backend():
    """The CPU backend with real DirectML's guard: FFTs are refused as the abort they are on the device."""
    from dmlprof.backends import resolve_backend
    from dmlprof.backends.dml import DmlBackend
    from dmlprof.directml.failures import ABORTS, COMPLEX_MESSAGE, DirectMLSemantics, Failure

    cpu = resolve_backend("cpu")

    class RefusingCpu(type(cpu)):
        refuses_calls = True
        refusal_for = DmlBackend.refusal_for
        failure_in, note_failure = DirectMLSemantics.failure_in, DirectMLSemantics.note_failure

        def failure_rule(self):
            def rule(func, args, kwargs):
                if func.name().startswith("aten::_fft"):
                    return Failure(ABORTS, COMPLEX_MESSAGE.format(dtype="ComplexFloat"), "SIGABRT")
                return None
            return rule

    return RefusingCpu()


CATCHES_THE_REFUSAL = """\
import sys, torch
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn(4, 8)
    try:
        x = torch.fft.rfft(x).abs()[:, :8]
    except {caught}:
        x = x * 2  # "a CPU fallback": on DirectML the process has already ended at the FFT
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
open(sys.argv[1], "w").write("trained on")
"""


@pytest.mark.parametrize("caught", ["RuntimeError", "Exception", "BaseException"])
def test_r29_a_script_catching_the_guards_refusal_stops_there_with_exit_4(tmp_path, caught):
    from dmlprof import runner

    script = tmp_path / "fft_fallback.py"
    script.write_text(CATCHES_THE_REFUSAL.format(caught=caught), encoding="utf-8")
    marker = tmp_path / "marker.txt"
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=_refusing_cpu_backend(), profiler=False, warmup=0, steps=2,
                    script_args=[str(marker)])
    assert stopped.value.exit_code == 4 and "ends the process" in str(stopped.value)
    assert not marker.exists()  # the script did not run on past the refused call
    session = stopped.value.session
    assert session.meta.partial and "_fft_r2c" in (session.meta.failed_op or "")
    assert session.ops["op"].iloc[-1] == session.meta.failed_op  # nothing after the refused call is kept
    assert session.meta.device_failure is not None and session.meta.device_failure.kind == "aborts"


def test_r29_the_refusal_is_no_exception_a_script_can_swallow():
    from dmlprof.errors import CallRefused

    assert not issubclass(CallRefused, Exception)
    backend = _refusing_cpu_backend()
    from dmlprof.directml.failures import ABORTS, Failure

    refusal = backend.refusal_for(Failure(ABORTS, "x", "SIGABRT"))
    assert isinstance(refusal, CallRefused) and backend.first_refusal is refusal
