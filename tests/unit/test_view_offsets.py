"""Real torch-directml reports storage_offset() 0 for every view (realdml): the offsets its views should have are
worked out from the calls that made them (dmlprof.directml.view_offsets), and the written-view class is judged by
those. Here the CPU's own offsets are the truth, and the tracker is told every view reports 0, as on DirectML."""
from __future__ import annotations

import gc
import json

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dmlprof.directml.call_arguments import arguments_judge
from dmlprof.directml.view_offsets import IntendedOffsets
from dmlprof.record.frame import op_name
from dmlprof.tables.wrong_classes import Call, classes_for


class _AsOnDirectML(TorchDispatchMode):
    """Each call below autograd, as the recorder sees it: the written-view judge before it, the tracker after."""

    def __init__(self):
        super().__init__()
        self.offsets = IntendedOffsets(op_name, reported=lambda tensor: 0)  # every view reports 0, as on DirectML
        self.judge = arguments_judge(offset_of=self.offsets.offset_of)
        self.flagged = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        text = self.judge(func, args, kwargs or {})
        if text and classes_for(Call(op_name(func), ("float32",), ((),), "forward", json.loads(text))):
            self.flagged.append(op_name(func))
        out = func(*args, **(kwargs or {}))
        self.offsets.note(func, args, kwargs, out)
        return out


def test_each_views_offset_is_worked_out_from_the_call_that_made_it_as_the_cpu_gives_it():
    x = torch.arange(64.).view(8, 8)
    views = {
        "slice inner": lambda: x[:, 4:], "select": lambda: x[1], "slice dim 0": lambda: x[1:],
        "slice of a slice": lambda: x[1:][:, 2:], "view then select": lambda: x[2].view(2, 4)[1],
        "transpose then select": lambda: x.t()[3], "unbind": lambda: x.unbind(0)[2], "split": lambda: x.split(3)[1],
        "chunk": lambda: x.chunk(2, 1)[1], "diagonal": lambda: x.diagonal(1), "narrow": lambda: x.narrow(1, 2, 3),
        "as_strided": lambda: x.as_strided((2,), (1,), 5), "negative slice": lambda: x[-2:],
        "a slice viewed": lambda: x[4:].view(-1)[3:], "prefix": lambda: x[:, :4], "first row": lambda: x[0],
    }
    with _AsOnDirectML() as mode:
        made = {name: make() for name, make in views.items()}
    for name, view in made.items():
        assert mode.offsets.offset_of(view) == view.storage_offset(), name
    assert sum(bool(view.storage_offset()) for view in made.values()) == len(made) - 2  # the class is not empty


def test_a_write_past_the_bases_start_is_flagged_though_every_view_reports_offset_0():
    with _AsOnDirectML() as mode:
        z = torch.ones(2, 8, requires_grad=True) * 1
        z[:, 4:] = 0.0  # h[:, 4:] = 0: flagged
    assert len(mode.flagged) == 1 and mode.flagged[0].startswith(("aten::fill_", "aten::copy_"))
    with _AsOnDirectML() as mode:  # any in-place op, by its schema (re-probe 14, case 21)
        z = torch.ones(2, 8, requires_grad=True) * 1
        torch.nn.ReLU6(inplace=True)(z[:, 4:])
        torch._foreach_mul_([z[1:]], 2.0)
    assert mode.flagged == ["aten::hardtanh_", "aten::_foreach_mul_.Scalar"]
    with _AsOnDirectML() as mode:
        z = torch.ones(2, 8, requires_grad=True) * 1
        z[:, :4] = 0.0  # offset 0: right on realdml
        z[0].mul_(2)
        z.view(16)[2:].detach().mul_(2)  # autograd records nothing
    assert mode.flagged == []


def test_the_kept_offsets_hold_no_view_alive():
    with _AsOnDirectML() as mode:
        view = torch.zeros(4, 4)[1:]
        assert mode.offsets.offset_of(view) == 4
        del view
        gc.collect()
    assert len(mode.offsets._offsets) == 0
