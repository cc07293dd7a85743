"""``copy.deepcopy`` of the stand-in's tensors (re-probe 19, case 5): torch copied a plain tensor through its
storage, which holds no memory on the stand-in, and every prediction of a model that deep-copies a module with
buffers in its step (BYOL's lazily made target encoder, a best-weights copy) died of SIGSEGV. torch copies
torch-directml's storage-less tensors by ``clone()``; the stand-in's are copied so too."""
from __future__ import annotations

import pytest

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)

_LAZY_TARGET = """
    if not hasattr(self, "target"):
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        print("copied", self.target[1].running_mean.device.type, torch.equal(
            self.target[1].running_mean.cpu(), self.online[1].running_mean.cpu()), flush=True)
    with torch.no_grad():
        t = self.target(x)
    return self.online(x) + t
"""


@pytest.mark.parametrize("target", ["dml", "xpu"])
def test_a_module_deep_copied_in_the_step_is_predicted_and_keeps_its_values(linear_model_file, capsys, target):
    model = linear_model_file(_LAZY_TARGET, init="self.online = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))",
                              extra="import copy\n")
    session = predict_scan(model, target=target)
    assert session.meta.device_failure is None and len(session.ops) > 0
    seen = {line for line in capsys.readouterr().out.splitlines() if line.startswith("copied")}
    expected = "privateuseone" if target == "dml" else target
    assert seen == {f"copied {expected} True"}
