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
    assert session.meta["run_mode"] == "block" and session.meta["steps"] == 2
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
    assert run.session.partial and "stop here" in run.session.meta["partial_reason"]
    assert len(run.session.ops) > 0
    # recording really stopped: ops after the block are not recorded anywhere
    torch.ones(2) + 1
    assert not torch.utils._python_dispatch._get_current_dispatch_mode()
