"""The emulated DirectML device keeps a factory's device argument of no index, as torch-directml does (re-probe 19,
14): ``torch.arange(16, device=x.device.type)`` makes a tensor on "privateuseone" (no index), and adding it to one on
"privateuseone:0" raises "Expected all tensors to be on the same device ..." on DirectML; the emulated device ran it.
Measured on realdml (torch-directml 0.2.5): tests/realdml/test_indexless_device_on_real_directml.py, which holds
each call below against the real device.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.live  # torch-version-sensitive: runs on torch 2.4.1 too

SAME_DEVICE = "Expected all tensors to be on the same device, but found at least two devices, "
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("make", [
    lambda: torch.arange(4, device="privateuseone"), lambda: torch.zeros(4, device="privateuseone"),
    lambda: torch.randn(4, device="privateuseone"), lambda: torch.empty_strided((4,), (1,), device="privateuseone"),
    lambda: torch.zeros_like(torch.ones(4), device="privateuseone"),
], ids=["arange", "zeros", "randn", "empty_strided", "zeros_like"])
def test_a_factory_given_privateuseone_without_an_index_makes_a_tensor_of_no_index(emulated_dml_backend, make):
    made = make()
    assert str(made.device) == "privateuseone" and made.get_device() == -1


def test_to_and_tensor_give_the_index_as_torch_directml_does(emulated_dml_backend):
    bare = torch.arange(4, device="privateuseone").float()
    assert str(bare.to("privateuseone").device) == "privateuseone:0"
    assert str(torch.ones(4).to("privateuseone").device) == "privateuseone:0"
    assert str(torch.tensor([1.0], device="privateuseone").device) == "privateuseone:0"
    assert str(bare.to(torch.float16).device) == "privateuseone"  # no device asked: it stays


def test_an_index_less_tensors_results_keep_its_device_and_values(emulated_dml_backend):
    bare = torch.arange(4, device="privateuseone").float()
    for result in (bare + bare, torch.relu(bare - 1), bare.sum(), bare.view(2, 2), torch.softmax(bare, 0)):
        assert str(result.device) == "privateuseone"
    assert (bare * 2 + 1).cpu().tolist() == [1.0, 3.0, 5.0, 7.0]


@pytest.mark.parametrize("call, first, second", [
    (lambda x, a: x + a, "privateuseone:0", "privateuseone"), (lambda x, a: a + x, "privateuseone", "privateuseone:0"),
    (lambda x, a: x.clone().add_(a), "privateuseone:0", "privateuseone"),
    (lambda x, a: torch.maximum(x, a), "privateuseone:0", "privateuseone"),
    (lambda x, a: torch.lerp(x, a, 0.5), "privateuseone:0", "privateuseone"),
    (lambda x, a: torch.nn.functional.mse_loss(x, a), "privateuseone:0", "privateuseone"),
], ids=["add", "radd", "add_", "maximum", "lerp", "mse_loss"])
def test_an_index_less_tensor_beside_an_indexed_one_is_refused_in_directmls_words(emulated_dml_backend, call, first,
                                                                                  second):
    x = torch.ones(4, device=emulated_dml_backend.device())
    a = torch.arange(4, device="privateuseone").float()
    with pytest.raises(RuntimeError) as raised:
        call(x, a)
    assert str(raised.value).splitlines()[0] == f"{SAME_DEVICE}{first} and {second}!"


@pytest.mark.parametrize("call", [
    lambda x, a: torch.cat([x, a]), lambda x, a: torch.mm(x.view(1, 4), a.view(4, 1)),
    lambda x, a: torch.nn.functional.linear(a.view(1, 4), torch.ones(3, 4, device=x.device)),
    lambda x, a: x.index_select(0, a.long()), lambda x, a: x.clone().copy_(a),
    lambda x, a: torch.gather(x, 0, a.long()), lambda x, a: x.masked_fill(a > 1, 0),
    lambda x, a: a.masked_fill(x > 1, 0),
], ids=["cat", "mm", "linear", "index_select", "copy_", "gather", "masked_fill", "masked_fill_by_indexed"])
def test_calls_directml_takes_with_both_devices_still_run(emulated_dml_backend, call):
    x = torch.ones(4, device=emulated_dml_backend.device())
    a = torch.arange(4, device="privateuseone").float()
    assert call(x, a).device.type == "privateuseone"


def test_a_refused_random_call_draws_nothing_from_the_generator(emulated_dml_backend):
    # the call is first tried on host copies: a refused or a taken one must not draw twice
    x = torch.ones(4, device=emulated_dml_backend.device())
    a = torch.arange(4, device="privateuseone").float()
    torch.manual_seed(0)
    try:
        torch.normal(x, a.abs() + 1)  # two devices: tried on the host, then refused or run
        drew = True
    except RuntimeError:
        drew = False
    after = torch.randn(3)
    torch.manual_seed(0)
    if drew:
        torch.normal(x, torch.ones(4, device=x.device))
    assert torch.equal(torch.randn(3), after)


def test_the_probes_model_fails_on_the_emulated_device_as_on_directml(tmp_path):
    model = ROOT / "docs" / "probe19" / "thread_forward_device_type_string.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NOTHREAD": "1"}
    done = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(model), "--device", "emulated-dml",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 3, done.stderr
    assert f"{SAME_DEVICE}privateuseone:0 and privateuseone" in done.stderr.strip().splitlines()[-1]
