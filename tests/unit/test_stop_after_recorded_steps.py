"""A stop signal that comes after a script took every recorded step leaves a whole recording: the session says how
the run ended, not that its figures cover only the steps that ran (re-probe 16, case 30: a `kill` of the script's
process past its recorded steps labelled a whole recording "PARTIAL SESSION")."""
from __future__ import annotations

import os

import pytest

from dmlprof.backends import resolve_backend

POSIX = os.name == "posix"

TRAIN_THEN_STOPPED = """
import os, signal, torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range({steps}):
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
os.kill(os.getpid(), signal.SIGTERM)  # the scheduler's, or a `kill` from top
"""


def _stopped_session(tmp_path, steps_taken: int):
    from dmlprof import interrupts, runner

    script = tmp_path / "train.py"
    script.write_text(TRAIN_THEN_STOPPED.format(steps=steps_taken), encoding="utf-8")
    with interrupts.stopping(), pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=resolve_backend("cpu"), profiler=False, warmup=0, steps=2, run_to_end=True)
    assert stopped.value.exit_code == 143, str(stopped.value)
    return stopped.value.session.meta


@pytest.mark.skipif(not POSIX, reason="a SIGTERM to oneself ends a Windows process outright")
def test_a_sigterm_past_the_recorded_steps_keeps_a_whole_session_that_says_it_was_stopped(tmp_path):
    meta = _stopped_session(tmp_path, steps_taken=3)
    assert not meta.partial
    assert meta.steps == 2
    assert any(note.startswith("stopped by SIGTERM after its recorded steps") for note in meta.notes), meta.notes


@pytest.mark.skipif(not POSIX, reason="a SIGTERM to oneself ends a Windows process outright")
def test_a_sigterm_before_the_last_recorded_step_is_still_a_partial_session(tmp_path):
    meta = _stopped_session(tmp_path, steps_taken=1)
    assert meta.partial
