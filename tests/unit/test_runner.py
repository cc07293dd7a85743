"""The runner's own promises, beyond what the CLI tests see: what a stopped run says about where it stopped."""
from __future__ import annotations

import pytest

from dmlprof.runner import ScanStopped, scan

WRONG_SHAPE = '''
import torch
from torch import nn

def build_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(10, 4))

def make_batch(batch_size):
    return torch.randn(batch_size, 12), torch.randint(0, 4, (batch_size,))
'''


@pytest.mark.quick
@pytest.mark.parametrize("warmup", [0, 1])
def test_a_call_failing_inside_library_code_is_placed_by_its_module(tmp_path, warmup):
    """A model file's call that fails inside torch's own nn.Linear has no user line to name: the error
    names the module that made it, and the partial session keeps it."""
    model = tmp_path / "wrong_shape.py"
    model.write_text(WRONG_SHAPE, encoding="utf-8")
    with pytest.raises(ScanStopped) as stopped:
        scan(model, "cpu", steps=1, warmup=warmup, profiler=False)
    assert "(at aten::addmm, in Sequential.1 (Linear))" in str(stopped.value)
    meta = stopped.value.session.meta
    assert meta.failed_op == "aten::addmm" and meta.failed_module == "Sequential.1" and not meta.failed_source
    assert stopped.value.session.meta.partial_reason.endswith("in Sequential.1 (Linear))")
