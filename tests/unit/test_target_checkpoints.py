"""``torch.save``/``torch.load``/``pickle`` of the stand-in's tensors under ``--target xpu``/``mps``
(dmlprof/predict/target_checkpoints.py). A state_dict saved in the step failed at the save ("Attempted to access the
data pointer on an invalid python storage"): torch read the device's type as "xpu" and took its path for tensors with
storage, which on the stand-in holds no memory. What real XPU and MPS give is read in torch/serialization.py (2.4.1,
2.13), not measured: the file records the storage's location ("xpu:0", "mps"), a load without ``map_location`` or
with the device's puts the tensors there, ``map_location="cpu"`` on the host; views of one storage stay views."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state_dict_saved_in_the_step.py"

_ROUND_TRIPS = """
import copy, io, os, pickle, tempfile, zipfile
sd = self.fc.state_dict()
sd["cols"] = sd["weight"][:, 1:]  # a view: saved with its base's storage
buf = io.BytesIO()
torch.save(sd, buf)
record = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
pickled = record.read(next(name for name in record.namelist() if name.endswith("data.pkl")))
print("location", pickled.count(b"%s") > 0, b"privateuseone" in pickled, b"dmlprof" in buf.getvalue(), flush=True)

def show(how, got):
    same = torch.equal(got["weight"].cpu(), sd["weight"].cpu()) and torch.equal(got["cols"].cpu(),
                                                                               sd["weight"].cpu()[:, 1:])
    with torch.no_grad():
        got["weight"].add_(1)
    shared = torch.equal(got["cols"].cpu(), got["weight"].cpu()[:, 1:])
    print("got", how, got["weight"].device, got["cols"].device, same, shared, flush=True)

for how, where in [("device", x.device), ("type", x.device.type), ("cpu", "cpu"), ("none", None)]:
    for weights_only in (False, True):
        buf.seek(0)
        show(how, torch.load(buf, map_location=where, weights_only=weights_only))
path = os.path.join(tempfile.mkdtemp(), "w.pt")
torch.save(sd, path)
show("path", torch.load(path, weights_only=True))
show("pickle", pickle.loads(pickle.dumps(sd)))
show("deepcopy", copy.deepcopy(sd))
return self.fc(x)
"""


@pytest.mark.parametrize("target", ["xpu", "mps"])
def test_the_reproducer_saves_and_loads_onto_the_target(target, capsys):
    session = predict_scan(str(FIXTURE), target=target)
    assert session.meta.device_failure is None
    seen = {line for line in capsys.readouterr().out.splitlines() if line.startswith("loaded")}
    assert seen == {f"loaded {target}:0"}


@pytest.mark.parametrize("target, location, deepcopy_shares",
                         [("xpu", "xpu:0", True), ("mps", "mps", False)])  # MPS deep-copies by clone()
def test_a_state_dict_round_trips_as_on_the_target(linear_model_file, capsys, target, location, deepcopy_shares):
    model = linear_model_file(_ROUND_TRIPS.replace("%s", location))
    session = predict_scan(model, target=target)
    assert session.meta.device_failure is None
    out = capsys.readouterr().out.splitlines()
    assert {line for line in out if line.startswith("location")} == {"location True False False"}
    on_target = f"{target}:0 {target}:0 True True"
    expected = {f"got device {on_target}", f"got type {on_target}", f"got none {on_target}",
                "got cpu cpu cpu True True", f"got path {on_target}",
                f"got pickle {target}:0 {target}:0 True False",  # each storage pickled on its own, as on the CPU
                f"got deepcopy {target}:0 {target}:0 True {deepcopy_shares}"}
    assert {line for line in out if line.startswith("got")} == expected


@pytest.mark.skipif(importlib.util.find_spec("safetensors") is None, reason="safetensors is not installed")
@pytest.mark.parametrize("target", ["xpu", "mps"])
def test_safetensors_saves_the_targets_tensors(linear_model_file, capsys, target):
    """safetensors groups tensors sharing memory by their storage's ``data_ptr()``, which raised on the stand-in."""
    model = linear_model_file("""
        from safetensors.torch import load, save
        got = load(save({"weight": self.fc.weight.detach(), "bias": self.fc.bias.detach()}))
        print("safetensors", got["weight"].device, torch.equal(got["weight"], self.fc.weight.detach().cpu()),
              flush=True)
        return self.fc(x)
    """)
    assert predict_scan(model, target=target).meta.device_failure is None
    assert {line for line in capsys.readouterr().out.splitlines() if line.startswith("safetensors")} == {
        "safetensors cpu True"}
