"""How the transparency run (tools/realdml/transparency.py) judges one sample, with scripted samples.

GIVEN a sample whose recorded run always computes otherwise (the recorder's doing), one whose every run draws
      a different value (a kernel that sums in no fixed order, recorded or not), and one that is the same
WHEN  the transparency judge runs each plainly and under a recorder
THEN  the first differs, the second is not judged (its runs differ among themselves), the third is the same.
Cheap (CPU tensors, a stand-in recorder): runs in every CI lane.
"""
from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

TOOL = Path(__file__).resolve().parents[2] / "tools" / "realdml" / "transparency.py"


def _transparency():
    spec = importlib.util.spec_from_file_location("transparency_under_test", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Recorder:
    """What the judge needs of dmlprof's recorder: a context that counts its calls; ``recording`` tells the
    scripted sample whether it runs under it."""
    recording = False

    def __init__(self, backend, sync):
        self.rows = [None, None]

    def __enter__(self):
        _Recorder.recording = True

    def __exit__(self, *exc):
        _Recorder.recording = False
        return False


def _samples(compute):
    """A truth_samples module whose one sample returns ``compute()`` as its output."""
    sample = SimpleNamespace(run=lambda device: torch.tensor([compute()]))
    return SimpleNamespace(sample=lambda key: sample, ops=dict)


def _judge(compute):
    return _transparency()._judge("probe.scripted", "cpu", None, torch, _samples(compute), _Recorder)


def test_a_recorded_run_that_always_computes_otherwise_differs():
    assert _judge(lambda: 2.0 if _Recorder.recording else 1.0)["outcome"] == "differs"


def test_a_sample_whose_runs_differ_among_themselves_is_not_judged():
    values = itertools.count()
    judged = _judge(lambda: float(next(values)))
    assert judged["outcome"] == "unjudged" and "not deterministic" in judged["why"]


def test_a_sample_whose_recorded_run_differs_once_is_not_held_to_it():
    # the plain runs agree, and a retaken recorded run computes what they compute: the first was chance
    recorded_runs = itertools.count()
    judged = _judge(lambda: (2.0 if next(recorded_runs) == 0 else 1.0) if _Recorder.recording else 1.0)
    assert judged["outcome"] == "unjudged"


def test_a_sample_computing_the_same_is_the_same():
    assert _judge(lambda: 1.0) == {"outcome": "same", "calls": 2}


def test_every_run_of_a_sample_runs_the_same_sample_object():
    # OpInfo draws some arguments (huber_loss's delta) from Python's generator each time a sample is built:
    # a sample rebuilt for the recorded run would be another sample, and read as the recorder's difference
    built = itertools.count()

    def sample(key):
        value = float(next(built))
        return SimpleNamespace(run=lambda device: torch.tensor([value]))

    judged = _transparency()._judge("probe.rebuilt", "cpu", None, torch, SimpleNamespace(sample=sample, ops=dict),
                                    _Recorder)
    assert judged["outcome"] == "same"
