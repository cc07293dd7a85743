"""A program's ``__torch_function__`` tensor subclass sees only the program's own calls under dmlprof's module
attribution (re-probe 12, cases 2-3: the hooks read each module output's ``grad_fn`` through the subclass, so a
counting subclass counted 2 more calls per module output and a strict one raised TypeError)."""
from __future__ import annotations

import torch

from dmlprof.record.attribution import ModuleTracker


class Counting(torch.Tensor):
    seen: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Counting.seen.append(getattr(func, "__qualname__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def _calls_the_subclass_sees(tracker=None) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    Counting.seen = []
    if tracker is not None:
        tracker.install()
    try:
        loss = model(torch.randn(6, 4).as_subclass(Counting)).pow(2).mean()
        loss.backward()
    finally:
        if tracker is not None:
            tracker.remove()
    return list(Counting.seen)


def test_the_hooks_reads_of_module_outputs_do_not_reach_the_programs_subclass():
    plain = _calls_the_subclass_sees()
    tracked = _calls_the_subclass_sees(ModuleTracker())
    assert plain and tracked == plain


class CountingMode(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen: list = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(getattr(func, "__qualname__", str(func)))
        return func(*args, **(kwargs or {}))


def _calls_the_mode_sees(tracker=None) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    mode = CountingMode()
    if tracker is not None:
        tracker.install()
    try:
        with mode:  # (re-probe 14 case 27: a mode saw the hooks' grad_fn reads of a subclass's outputs)
            loss = model(torch.randn(6, 4).as_subclass(Counting)).pow(2).mean()
        loss.backward()
    finally:
        if tracker is not None:
            tracker.remove()
    return mode.seen


def test_the_hooks_reads_of_module_outputs_do_not_reach_the_programs_torch_function_mode():
    plain = _calls_the_mode_sees()
    tracked = _calls_the_mode_sees(ModuleTracker())
    assert plain and tracked == plain
