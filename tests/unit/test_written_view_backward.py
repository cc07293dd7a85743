"""Re-probe 15, cases 1/2 and 8: the written-view class (an in-place write into a view past its base's start) is
wrong on DirectML only in the backward through the CopySlices node the write leaves. So it is a finding where a
backward runs through that node, not at the write (eval() inference without no_grad, a loss kept in
``losses[i]``, both right on realdml); and an autograd.Function writing its input with ``ctx.mark_dirty`` (its
forward runs with grad mode off) is found as well. Recorded as a scan records, on the emulated device (scripts
under ``--target dml``) and the prediction's stand-in (model files)."""
from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import pytest
import torch

from dmlprof.record.frame import op_name
from dmlprof.record.recorder import Recorder
from dmlprof.tables.wrong_classes import Call, classes_for

ROOT = Path(__file__).resolve().parents[2]


class InplaceScale(torch.autograd.Function):
    """InPlaceABN's way: the input written in place, marked dirty."""

    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(3)

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


def _recorded(backend, step):
    """(the ops the written-view class flags, step()'s result), recorded as a scan records."""
    recorder = Recorder(backend, sync=False)
    with recorder:
        result = step(backend.device())
    flagged = [op_name(row[2]) for row in recorder.rows
               if row[-1] and any("past its base" in c.klass for c in classes_for(
                   Call(op_name(row[2]), ("float32",), ((),), "forward", json.loads(row[-1]))))]
    return flagged, result


def _offset_slice_times_3(dev, backward=True, start=2, function=False):
    x = torch.arange(1., 9., device=dev).requires_grad_()
    z = (x * 1).view(2, 4)
    if function:
        InplaceScale.apply(z[:, start:])
    else:
        z[:, start:] *= 3
    out = (z * torch.arange(8., device=dev).view(2, 4)).sum()
    if not backward:
        return out.item()
    out.backward()
    return x.grad.cpu().tolist()


@pytest.mark.live
def test_a_written_view_is_flagged_only_where_a_backward_runs_through_its_write(emulated_dml_backend):
    flagged, grad = _recorded(emulated_dml_backend, _offset_slice_times_3)
    assert "aten::mul_.Tensor" in flagged and grad == _offset_slice_times_3("cpu")  # training on it: wrong on DML
    flagged, value = _recorded(emulated_dml_backend, lambda dev: _offset_slice_times_3(dev, backward=False))
    assert flagged == [] and value == _offset_slice_times_3("cpu", backward=False)  # no gradient ever taken

    def eval_inference(dev):  # case 1: a detect head decoding boxes in place, eval() without no_grad
        torch.manual_seed(0)
        head = torch.nn.Conv2d(3, 7, 1).to(dev).eval()
        y = head(torch.randn(2, 3, 4, 4).to(dev)).permute(0, 2, 3, 1).sigmoid()
        y[..., 2:4] = (y[..., 2:4] * 2) ** 2
        return round(y.sum().item(), 4)
    flagged, value = _recorded(emulated_dml_backend, eval_inference)
    assert flagged == [] and value == eval_inference("cpu")

    def loss_history(dev):  # case 2: each step's loss kept in a preallocated tensor, not detached
        w = torch.ones(3, device=dev, requires_grad=True)
        losses = torch.zeros(3, device=dev)
        for i in range(3):
            loss = (w * (i + 1)).sum()
            losses[i] = loss
            loss.backward()
        return losses.tolist(), w.grad.tolist()
    flagged, value = _recorded(emulated_dml_backend, loss_history)
    assert flagged == [] and value == loss_history("cpu")
    # the same history backpropagated through: its copies into losses[1:] are wrong on DirectML
    flagged, _ = _recorded(emulated_dml_backend, _history_backpropagated)
    assert flagged == ["aten::copy_", "aten::copy_"]


def _history_backpropagated(dev):
    w = torch.ones(3, device=dev, requires_grad=True)
    losses = torch.zeros(3, device=dev)
    for i in range(3):
        losses[i] = (w * (i + 1)).sum()
    losses.sum().backward()
    return w.grad.tolist()


@pytest.mark.live
def test_a_mark_dirty_functions_write_into_an_offset_slice_is_flagged_where_backpropagated(emulated_dml_backend):
    # case 8: the Function's forward runs with grad mode off; realdml's gradient [0,3,2,3,12,15,6,7], CPU's below
    flagged, grad = _recorded(emulated_dml_backend, lambda dev: _offset_slice_times_3(dev, function=True))
    assert flagged == ["aten::mul_.Tensor"] and grad == [0, 1, 6, 9, 4, 5, 18, 21]
    assert not _recorded(emulated_dml_backend, lambda dev: _offset_slice_times_3(dev, function=True, start=0))[0]
    assert not _recorded(emulated_dml_backend,
                         lambda dev: _offset_slice_times_3(dev, function=True, backward=False))[0]

    def no_grad_write(dev):  # a no_grad write into the same slice: autograd records nothing, right on realdml
        x = torch.arange(1., 9., device=dev).requires_grad_()
        z = (x * 1).view(2, 4)
        z[:, :1] *= 2  # an earlier recorded write (offset 0) leaves a CopySlices the no_grad one must not borrow
        with torch.no_grad():
            z[:, 2:] *= 3
        z.sum().backward()
        return x.grad.tolist()
    flagged, grad = _recorded(emulated_dml_backend, no_grad_write)
    assert flagged == [] and grad == no_grad_write("cpu")


@pytest.mark.live
def test_the_watch_changes_no_gradient_and_holds_nothing_past_the_step(emulated_dml_backend):
    def double_backward(dev):  # autograd.grad with create_graph through the written slice, then backward
        x = torch.arange(1., 9., device=dev).requires_grad_()
        z = (x * 1).view(2, 4)
        z[:, 2:] = x.view(2, 4)[:, 2:] ** 2
        (gx,) = torch.autograd.grad(z.sum(), x, create_graph=True)
        (gx * x).sum().backward()
        return gx.tolist(), x.grad.tolist()
    flagged, value = _recorded(emulated_dml_backend, double_backward)
    assert value == double_backward("cpu") and "aten::copy_" in flagged

    bases = []

    def kept(dev):
        z = torch.arange(1., 9., device=dev).requires_grad_() * 1
        z[2:] = 0
        bases.append(weakref.ref(z))
        return None
    recorder = Recorder(emulated_dml_backend, sync=False)
    with recorder:
        kept(emulated_dml_backend.device())
        torch.ones(1, device=emulated_dml_backend.device()).add(1)  # the next call reads the write's node
        gc.collect()
        assert bases[0]() is None  # neither the base nor its graph outlive the user's references
    assert recorder.written_views.pending == []


def test_a_backward_through_a_write_reaches_the_salvaged_session(tmp_path):
    from dmlprof.record.journal import Journal, read_journal

    journal = Journal(tmp_path / "j")
    written = '{"autograd_records": true, "backward_runs": false, "view_offset": 4}'
    first, second = journal.begin("aten::copy_", 0, "forward", "", ()), journal.begin("aten::copy_", 0, "forward",
                                                                                       "", ())
    journal.end(first, (), 0, 1, 1, "a.py:3", (), written)
    journal.end(second, (), 0, 1, 1, "a.py:4", (), written)
    journal.backpropagated(second)
    journal.close()
    calls = read_journal(tmp_path / "j").calls
    found = [json.loads(call.arguments)["backward_runs"] for call in calls]
    assert found == [False, True] and json.loads(calls[1].arguments)["autograd_records"] is True


MODEL = '''
import torch
from torch import nn

BATCH_SIZE = 4


class InplaceScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(3)

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 3)
        self.register_buffer("seen", torch.zeros(4, 8))

    def forward(self, x):
        hidden = self.fc(x).clone()
        {write}
        return self.out(hidden)


def build_model():
    torch.manual_seed(0)
    return Net()


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 3, (batch_size,))
'''


@pytest.mark.live
@pytest.mark.parametrize("write, flagged", [
    ("InplaceScale.apply(hidden[:, 4:])", True),  # case 8, predicted
    ("hidden[:, 4:] = 0.0", True),
    ("kept = hidden * 1\n        kept[:, 4:] = 0.0", False),  # written, never in the loss's graph
], ids=["mark_dirty", "slice_assignment", "never_backpropagated"])
def test_the_prediction_judges_a_written_view_by_its_backward_too(tmp_path, write, flagged):
    from dmlprof.predict import predict_scan
    from dmlprof.report import build_report

    path = tmp_path / "net.py"
    path.write_text(MODEL.replace("{write}", write))
    report = build_report(predict_scan(path, batch_size=4))
    found = [k for k in report.known_wrong_results if "starts past its base's start" in k.klass]
    assert bool(found) == flagged, report.known_wrong_results
