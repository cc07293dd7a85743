"""The predicted dropout mask's dtype is the device's (re-probe 16, 15): torch-directml's native_dropout returns its
mask in the input's dtype (measured on realdml, torch-directml 0.2.5 on torch 2.4.1: float32 for float32 input,
float16 for float16, values 0 and 1), so a real step's dropout backward is native_dropout_backward (float32,
float32). The prediction recorded the CPU's bool mask, and `scan --confirm` replayed (bool, float32), a call a
real step never makes, which DirectML answers in bool: "contradicted ... wrong", exit 5, on any nn.Dropout.
MPS and XPU return the CPU's bool mask: kept."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.live  # torch-version-sensitive: runs on torch 2.4.1 too

DROPOUT_MODEL = """
import torch
from torch import nn

def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 24), nn.ReLU(), nn.Dropout(0.2), nn.Linear(24, 3)){half}

def make_batch(batch_size):
    return torch.randn(batch_size, 16){half}, torch.randint(0, 3, (batch_size,))
"""


def _dropout_calls(tmp_path: Path, target: str = "dml", half: bool = False, **options) -> dict:
    path = tmp_path / "dropout_model.py"
    path.write_text(textwrap.dedent(DROPOUT_MODEL).format(half=".half()" if half else ""), encoding="utf-8")
    ops = predict_scan(path, target=target, batch_size=8, **options).ops
    rows = ops[ops["op"].str.startswith("aten::native_dropout")]
    return {(row.op, row.dtypes): row.verdict for row in rows.itertuples()}


def test_directml_dropout_mask_is_in_the_inputs_dtype_and_its_backward_runs_on_the_device(tmp_path):
    calls = _dropout_calls(tmp_path)
    assert calls == {("aten::native_dropout", "float32"): "device",
                     ("aten::native_dropout_backward", "float32"): "device"}


def test_directml_float16_dropout_mask_is_float16(tmp_path):
    calls = _dropout_calls(tmp_path, half=True)
    assert set(calls) == {("aten::native_dropout", "float16"), ("aten::native_dropout_backward", "float16")}


def test_directml_dropout_mask_without_values_is_in_the_inputs_dtype_too(tmp_path):
    calls = _dropout_calls(tmp_path, values_budget_bytes=0)
    assert set(calls) == {("aten::native_dropout", "float32"), ("aten::native_dropout_backward", "float32")}


@pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)
def test_other_targets_keep_the_bool_mask_their_devices_return(tmp_path):
    calls = _dropout_calls(tmp_path, target="mps", target_torch="2.13.0")
    assert set(calls) == {("aten::native_dropout", "bool,float32"), ("aten::native_dropout_backward", "bool,float32")}
