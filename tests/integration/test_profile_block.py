"""dmlprof.profile(): record a block of code from Python (a notebook's way in)."""
from __future__ import annotations

import pytest
import torch

import dmlprof
from dmlprof.render.terminal import render_text

pytestmark = pytest.mark.live


def _train(model, optimizer, steps):
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(torch.randn(4, 3)), torch.zeros(4, 2))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def test_profile_records_every_call_of_the_block_with_phases_and_modules():
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with dmlprof.profile("cpu") as run:
        assert run.session is None  # filled when the block ends
        _train(model, optimizer, steps=2)
    session = run.session
    assert session.meta.to_dict()["run_mode"] == "block" and session.meta.to_dict()["steps"] == 2
    ops = session.ops
    assert set(ops["phase"]) >= {"forward", "backward", "optimizer"}
    assert "Sequential.0" in set(ops.loc[ops["phase"] == "forward", "module"])
    assert "Sequential.0" in set(ops.loc[ops["phase"] == "backward", "module"])  # backward found its module
    # the recorder kept what each module is, for reports that name classes rather than bare indices
    assert session.meta.module_classes["Sequential.0"] == "Linear"
    assert session.meta.module_classes["Sequential.1"] == "ReLU"
    assert dmlprof.session.Session.from_dict(session.to_dict()).meta.module_classes == session.meta.module_classes
    assert "dmlprof.profile() block" in render_text(session)
    assert run._repr_html_().startswith('<div class="dmlprof-report" data-kind="block"')


def test_an_exception_in_the_block_keeps_the_partial_session():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError):
        with dmlprof.profile("cpu") as run:
            _train(model, optimizer, steps=1)
            raise ValueError("stop here")
    assert run.session.partial and "stop here" in run.session.meta.to_dict()["partial_reason"]
    assert len(run.session.ops) > 0
    # recording really stopped: ops after the block are not recorded anywhere
    torch.ones(2) + 1
    assert not torch.utils._python_dispatch._get_current_dispatch_mode()


def test_profile_gives_the_device_and_says_when_the_block_never_used_it():
    """GIVEN a block on the emulated device WHEN its tensors stay on the CPU THEN the report says the device was never
    used (not 'every call ran on the device'); moved to ``run.device``, its calls run there."""
    from dmlprof.report import build_report

    with dmlprof.profile("emulated-dml") as run:
        assert run.device is not None and run.device.type == "privateuseone"
        x = torch.randn(4, 4)
        (x @ x).sum()
    text = " ".join(render_text(run.session, width=80).split())
    assert "was never used in the block" in text and "run.device" in text
    assert "every call on device tensors ran on the device" not in text
    assert max(len(line) for line in render_text(run.session, width=80).splitlines()) <= 80
    with dmlprof.profile("emulated-dml") as run:
        x = torch.randn(4, 4).to(run.device)
        (x @ x).sum()
    report = build_report(run.session)
    assert report.summary.device_calls > 0 and report.device_unused_note is None


@pytest.mark.slow
def test_the_emulated_device_after_a_prediction_says_what_to_do(tmp_path):
    """A prediction holds torch's PrivateUse1 hooks for the process: profile('emulated-dml') after it fails with a
    remedy in its message (a notebook shows str(), not the CLI's line)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import dmlprof, sys\n"
            f"dmlprof.scan({str(root / 'models' / 'lenet5.py')!r}, target='dml')\n"
            "try:\n"
            "    with dmlprof.profile('emulated-dml'):\n"
            "        pass\n"
            "except dmlprof.errors.DmlprofError as exc:\n"
            "    print('ERROR', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=str(tmp_path),
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    error = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    if not error:  # on torch < 2.6 the emulated device needs no hooks of its own and loads after a prediction
        assert done.returncode == 0, done.stderr
        return
    assert "restart the kernel" in error[0] and "--target dml" in error[0]
