"""torch-directml's tensors have no storage (re-probe 20, cases 3, 5 and 16): what a script reads of it on real
torch-directml, and the same script on the emulated device under dmlprof, which answers as realdml does."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.realdml

#: the answers a script gets, and (realdml only: a dispatch mode would be recorded under dmlprof) the calls a
#: checkpoint round trip makes
PROBE = '''
import io, json, sys, torch, torch_directml
from torch.utils._python_dispatch import TorchDispatchMode
dev = torch_directml.device()
class Calls(TorchDispatchMode):
    seen = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func.overloadpacket)); return func(*args, **(kwargs or {}))
m = torch.nn.Linear(4, 3).to(dev)
found = {"has_storage": torch._C._has_storage(m.weight)}
for name, read in (("data_ptr", lambda: m.weight.data_ptr()), ("untyped_storage", lambda: m.weight.untyped_storage())):
    try:
        read(); found[name] = "ran"
    except Exception as exc:
        found[name] = str(exc).splitlines()[0]
logged = sys.argv[1:] == ["log"]
buf = io.BytesIO()
with Calls() if logged else io.BytesIO():
    torch.save(m.state_dict(), buf); buf.seek(0); sd = torch.load(buf, map_location=dev, weights_only=False)
found["loaded"] = sorted({v.device.type for v in sd.values()}) + [torch.equal(sd["weight"].cpu(), m.weight.detach().cpu())]
if logged:
    found["calls"] = sorted(set(Calls.seen))
print("FOUND", json.dumps(found))
'''


def _found(output: str) -> dict:
    return json.loads([line for line in output.splitlines() if line.startswith("FOUND ")][-1][6:])


def test_the_emulated_device_answers_a_scripts_storage_reads_as_real_directml(realdml, tmp_path):
    probe = tmp_path / "storage_probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    real = subprocess.run([sys.executable, str(probe), "log"], capture_output=True, text=True, env=realdml,
                          timeout=300)
    assert real.returncode == 0, real.stderr[-800:]
    on_directml = _found(real.stdout)
    assert on_directml["has_storage"] is False and on_directml["loaded"] == ["privateuseone", True]
    assert "doesn't have storage" in on_directml["data_ptr"] and "OpaqueTensorImpl" in on_directml["untyped_storage"]
    assert not [call for call in on_directml.pop("calls") if call.startswith("aten.set_")]  # a host copy, .to()
    emulated = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(probe), "--device", "emulated-dml",
                               "--no-profiler", "--out", str(tmp_path)], capture_output=True, text=True,
                              env=realdml, cwd=REPO, timeout=900)
    assert emulated.returncode == 0, emulated.stderr[-800:]
    assert _found(emulated.stdout) == on_directml


#: torch.load/torch.save of the device's own tensors where torch 2.4.1's numpy pickling shows (re-probe 21, 11 and 24)
CHECKPOINT_PROBE = '''
import io, json, warnings, torch, torch_directml
warnings.simplefilter("ignore")
dev = torch_directml.device()
m = torch.nn.Linear(4, 3).to(dev)
found = {}
def attempt(name, act):
    try:
        found[name] = act()
    except Exception as exc:
        found[name] = [type(exc).__name__, str(exc)]
def load(state, **kw):
    buf = io.BytesIO(); torch.save(state, buf); buf.seek(0)
    return sorted({v.device.type for v in torch.load(buf, **kw).values()})
attempt("weights_only_device", lambda: load(m.state_dict(), map_location=dev, weights_only=True))
attempt("weights_only_cpu", lambda: load(m.state_dict(), map_location="cpu", weights_only=True))
attempt("unset", lambda: load(m.state_dict(), map_location=dev))
attempt("weights_only_false", lambda: load(m.state_dict(), map_location=dev, weights_only=False))
def cpu_copies():
    buf = io.BytesIO(); torch.save(dict((k, v.cpu()) for k, v in m.state_dict().items()), buf); buf.seek(0)
    other = torch.nn.Linear(4, 3).to(dev); other.load_state_dict(torch.load(buf, map_location="cpu", weights_only=True))
    return [other.weight.device.type, torch.equal(other.weight.detach().cpu(), m.weight.detach().cpu())]
attempt("cpu_copies", cpu_copies)
attempt("save_parameter", lambda: load({"w": m.weight}, map_location=dev, weights_only=False))
attempt("save_requires_grad", lambda: load({"g": torch.ones(2, device=dev, requires_grad=True)}, map_location=dev))
print("FOUND", json.dumps(found))
'''


def test_the_emulated_device_saves_and_loads_the_devices_checkpoints_as_real_directml(realdml, tmp_path):
    """Measured: a weights-only load of the device's own checkpoint fails in torch 2.4.1's words (dmlprof raises them
    on torch 2.5+, whose host-copy pickling loaded), CPU copies load with ``weights_only=True`` (the remedy the known
    error dml_weights_only_load gives), and saving a tensor that requires grad fails in ``numpy()``'s words."""
    from dmlprof.backends.errors import match_known_error
    from dmlprof.directml.no_storage import REQUIRES_GRAD, WEIGHTS_ONLY_REFUSED

    probe = tmp_path / "checkpoint_probe.py"
    probe.write_text(CHECKPOINT_PROBE, encoding="utf-8")
    real = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, env=realdml, timeout=300)
    assert real.returncode == 0, real.stderr[-800:]
    on_directml = _found(real.stdout)
    refused = ["UnpicklingError", WEIGHTS_ONLY_REFUSED]
    assert on_directml["weights_only_device"] == refused and on_directml["weights_only_cpu"] == refused
    assert match_known_error(f"UnpicklingError: {WEIGHTS_ONLY_REFUSED}").key == "dml_weights_only_load"
    assert on_directml["unset"] == on_directml["weights_only_false"] == on_directml["save_parameter"] == [
        "privateuseone"]
    assert on_directml["cpu_copies"] == ["privateuseone", True]
    assert on_directml["save_requires_grad"] == ["RuntimeError", REQUIRES_GRAD]
    emulated = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(probe), "--device", "emulated-dml",
                               "--no-profiler", "--out", str(tmp_path)], capture_output=True, text=True,
                              env=realdml, cwd=REPO, timeout=900)
    assert emulated.returncode == 0, emulated.stderr[-800:]
    assert _found(emulated.stdout) == on_directml


#: re-probe 22, cases 10 and 13: a CUDA script's safetensors load onto its device, pinning and DLPack of a device
#: tensor; ``dml`` runs it on torch-directml (the ported script), else it names "cuda" (dmlprof's ``--from cuda``)
PORTED_PROBE = '''
import os, sys, tempfile, torch
from safetensors.torch import load_file, safe_open, save_file
dev = "cuda"
if sys.argv[1:] == ["dml"]:
    import torch_directml
    dev = torch_directml.device()
def attempt(name, act):
    try:
        print("PROBE", name, "ok", act())
    except Exception as exc:
        print("PROBE", name, type(exc).__name__, str(exc).splitlines()[0])
p = os.path.join(tempfile.mkdtemp(), "m.safetensors"); save_file(torch.nn.Linear(4, 3).state_dict(), p)
for spelling, d in (("str", str(torch.empty(0).to(dev).device)), ("device", torch.empty(0).to(dev).device)):
    if sys.argv[1:] != ["dml"]:
        d = "cuda" if spelling == "str" else torch.device("cuda")
    attempt("load_file/" + spelling, lambda: sorted({v.device.type for v in load_file(p, device=d).values()}))
m = torch.nn.Linear(4, 3).to(dev)
attempt("fix", lambda: [m.load_state_dict(load_file(p, device="cpu")) is not None, m.weight.device.type])
x = torch.randn(4, 3).to(dev)
attempt("pin_memory", lambda: x.pin_memory().device.type)
attempt("to_dlpack", lambda: torch.utils.dlpack.to_dlpack(x) is not None)
'''


def test_a_ported_scripts_safetensors_load_pinning_and_dlpack_fail_under_from_cuda_as_on_real_directml(realdml,
                                                                                                       tmp_path):
    pytest.importorskip("safetensors")
    probe = tmp_path / "ported_probe.py"
    probe.write_text(PORTED_PROBE, encoding="utf-8")
    real = subprocess.run([sys.executable, str(probe), "dml"], capture_output=True, text=True, env=realdml,
                          timeout=300)
    assert real.returncode == 0, real.stderr[-800:]
    on_directml = [line for line in real.stdout.splitlines() if line.startswith("PROBE ")]
    assert "PROBE load_file/str SafetensorError device privateuseone:0 is invalid" in on_directml
    assert "PROBE fix ok [True, 'privateuseone']" in on_directml
    emulated = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(probe), "--device", "emulated-dml",
                               "--from", "cuda", "--no-profiler", "--out", str(tmp_path)], capture_output=True,
                              text=True, env=realdml, cwd=REPO, timeout=900)
    assert emulated.returncode == 0, emulated.stderr[-800:]
    assert [line for line in emulated.stdout.splitlines() if line.startswith("PROBE ")] == on_directml


def test_set_of_an_empty_device_tensor_dies_on_real_directml_and_is_refused_as_that_crash(realdml, tmp_path):
    """Re-probe 22, case 11: the class rule's edge, measured again; a non-empty tensor's set_ runs."""
    probe = tmp_path / "set_probe.py"
    probe.write_text("import sys, torch, torch_directml\ndev = torch_directml.device()\nx = torch.randn(4, 3).to(dev)\n"
                     "t = torch.empty(0 if sys.argv[1] == 'empty' else 12, device=dev)\nt.set_(x)\nprint('ran')\n",
                     encoding="utf-8")
    crashed = subprocess.run([sys.executable, str(probe), "empty"], capture_output=True, text=True, env=realdml,
                             timeout=300)
    ran = subprocess.run([sys.executable, str(probe), "full"], capture_output=True, text=True, env=realdml, timeout=300)
    assert crashed.returncode == -11 and ran.returncode == 0 and "ran" in ran.stdout
    from dmlprof.directml.failures import ABORTS, failure

    meta = "meta"
    assert failure("aten::set_.source_Tensor", (torch_empty(0, meta), torch_empty(12, meta)), {}, meta).kind == ABORTS
    assert failure("aten::set_.source_Tensor", (torch_empty(12, meta), torch_empty(12, meta)), {}, meta) is None


def torch_empty(n: int, device: str):
    import torch

    return torch.empty(n, device=device)
