"""A recorded call that fails, caught by the script, lets its inputs go as soon as the script drops them, as it
does unrecorded: re-probe 16 case 11, a batch-size finder catching out-of-memory errors picked a 16x smaller batch
under a scan because each failed attempt's activations stayed held until the cycle collector ran."""
from __future__ import annotations

import gc
import weakref

import pytest
import torch

from dmlprof.backends import resolve_backend
from dmlprof.record.recorder import Recorder


@pytest.fixture
def without_the_cycle_collector():
    """Only reference counts free memory here: what a cycle holds stays held."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _fails_then_drops(multiply) -> bool:
    """Whether a big input of a failing ``multiply`` is freed once the caught error is dropped and the script lets
    the input go."""
    big = torch.ones(512, 512)
    held = weakref.ref(big)
    try:
        multiply(big, torch.ones(3, 3))  # the shapes do not match: RuntimeError
    except RuntimeError:
        pass
    del big
    return held() is None


def test_unrecorded_the_failed_calls_input_is_freed_at_once(without_the_cycle_collector):
    assert _fails_then_drops(torch.mm)  # the control: what plain Python does


def test_recorded_the_failed_calls_input_is_freed_at_once(without_the_cycle_collector):
    recorder = Recorder(resolve_backend("cpu"), sync=False)
    with recorder:
        freed = _fails_then_drops(torch.mm)
    assert recorder.failed_row is not None  # the failure was recorded, not passed by
    assert freed


def test_a_failure_inside_a_module_frees_the_modules_activations_at_once(without_the_cycle_collector):
    """The traceback holds the user's frames, and so the activations they hold, for as long as the error lives."""
    layer = torch.nn.Linear(512, 512)

    def forward(x, other):
        hidden = layer(x)
        return torch.mm(hidden, other)

    recorder = Recorder(resolve_backend("cpu"), sync=False)
    with recorder:
        hidden_refs = []
        real_linear = layer.forward

        def keep_ref(x):
            out = real_linear(x)
            hidden_refs.append(weakref.ref(out))
            return out

        layer.forward = keep_ref
        assert _fails_then_drops(forward)
    assert hidden_refs and hidden_refs[0]() is None
