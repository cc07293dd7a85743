"""Model code branching on ``x.device.type`` under ``--target mps`` / ``--target xpu`` (re-probe 16's 17): the
model sees a device of the target's type, as on the device, so it takes the branch the device takes; its device
arguments still make its tensors on the stand-in, and dmlprof's own reading of the run is the stand-in's."""
from __future__ import annotations

import pytest
import torch

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)

# diffusers' timestep guard (UNet2DConditionModel.forward): float32 on MPS, float64 elsewhere (MPS has no float64)
_GUARDED = """
    print("seen", x.device.type, x.device, x.is_mps, x.is_xpu)
    dtype = torch.float32 if x.device.type == "mps" else torch.float64
    t = torch.tensor([10], dtype=dtype, device=x.device)
    made = torch.zeros(4, device=x.device.type).to(x.device)
    rebuilt = torch.device(x.device.type, x.device.index or 0)  # accelerate's spelling (re-probe 19, 1 and 2)
    print("rebuilt", rebuilt, rebuilt == x.device, torch.device(str(x.device)).type)
    made = made + torch.arange(4, device=rebuilt, dtype=x.dtype)
    return self.fc(x) + t.float() + made
"""


@pytest.mark.parametrize("target", ["mps", "xpu"])
def test_the_model_sees_the_targets_device_type_and_its_tensors_stay_on_the_stand_in(linear_model_file, capsys,
                                                                                      target):
    session = predict_scan(linear_model_file(_GUARDED, name="unet.py"), target=target)
    out = capsys.readouterr().out.splitlines()
    seen = {line for line in out if line.startswith("seen")}
    rebuilt = {line for line in out if line.startswith("rebuilt")}
    assert seen == {f"seen {target} {target}:0 {target == 'mps'} {target == 'xpu'}"}
    assert rebuilt == {f"rebuilt {target}:0 True {target}"}
    # on MPS the float32 branch runs: no float64 failure (it was predicted at the guarded line)
    assert session.meta.failed_op is None and session.meta.device_failure is None
    ops = session.ops
    on_device = ops["output_devices"].str.contains("privateuseone")
    assert on_device.any() and "mps" not in " ".join(ops["output_devices"]) and "xpu" not in " ".join(
        ops["output_devices"])
    assert torch._C._len_torch_function_stack() == 0  # the mode ends with the prediction


_DEFAULT_DEVICE = """
    torch.set_default_device(x.device)
    try:
        made = torch.ones(4)
    finally:
        torch.set_default_device(None)
    with torch.device(x.device.type):
        made = made + torch.arange(4)
    print("defaults", made.device, torch.ones(1).device)
    return self.fc(x) + made
"""


@pytest.mark.parametrize("target", ["mps", "xpu"])
def test_a_default_device_of_the_targets_type_makes_factories_on_the_stand_in(linear_model_file, capsys, target):
    """Re-probe 20, 2: ``torch.set_default_device(x.device)`` (and ``with torch.device(...)``) around a factory:
    torch 2.13's DeviceContext sits below the type mode and filled in the real target device, where the factory
    has no kernel ("Could not run 'aten::empty.memory_format' with arguments from the 'MPS' backend")."""
    session = predict_scan(linear_model_file(_DEFAULT_DEVICE), target=target)
    assert session.meta.failed_op is None and session.meta.device_failure is None
    assert {line for line in capsys.readouterr().out.splitlines() if line.startswith("defaults")} == {
        f"defaults {target}:0 cpu"}  # the default reset: the CPU's again
    assert torch._C._len_torch_function_stack() == 0


def test_directml_prediction_reads_privateuseone_as_torch_directml_does(linear_model_file, capsys):
    predict_scan(linear_model_file('print("seen", x.device.type)\nreturn self.fc(x)'), target="dml")
    assert {line for line in capsys.readouterr().out.splitlines() if line.startswith("seen")} == {
        "seen privateuseone"}


_FROZEN_ENCODER = """
    self.encoder.eval()
    with torch.no_grad():
        h = self.encoder(x[:, None].expand(-1, 3, -1))
    return self.fc(h[:, 0])
"""


def _fast_path_for(device_type: str) -> bool:
    """Whether the running torch's encoder layer takes its fast path on ``device_type`` (torch 2.4's list lacks
    "xpu": the prediction's calls follow the torch it runs on)."""
    import inspect

    return f'"{device_type}"' in inspect.getsource(torch.nn.modules.transformer.TransformerEncoderLayer.forward)


@pytest.mark.parametrize("target", ["mps", "xpu"])
def test_torchs_encoder_fast_path_is_taken_as_the_target_takes_it(linear_model_file, target):
    """Re-probe 18, 1: a frozen nn.TransformerEncoder in eval: torch takes its fast path
    (``_transformer_encoder_layer_fwd``) only for cpu, cuda, xpu and the PrivateUse1 device; the stand-in read as
    PrivateUse1 and MPS was predicted to fail at a call real MPS never makes. Its override test
    (``has_torch_function``) is answered as without the mode that reads the device as the target's, so XPU
    keeps the fast path it takes."""
    model = linear_model_file(_FROZEN_ENCODER, init="""
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True), 1)
        self.encoder.requires_grad_(False)
        self.fc = nn.Linear(4, 4)""")
    session = predict_scan(model, target=target)
    assert session.meta.device_failure is None
    assert ("aten::_transformer_encoder_layer_fwd" in set(session.ops["op"])) is _fast_path_for(target)
