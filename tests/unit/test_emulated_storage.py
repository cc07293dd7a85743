"""The emulated DirectML device's tensors as torch-directml's to a scanned script: no storage to read (re-probe 20,
cases 3, 5 and 16).

torch-directml's tensors are an OpaqueTensorImpl without storage (measured on realdml: ``data_ptr()`` raises
"Cannot access data pointer of Tensor that doesn't have storage", ``untyped_storage()`` "Cannot access storage of
OpaqueTensorImpl", ``torch._C._has_storage`` answers False, and a ``torch.save``/``torch.load(map_location=dev)``
round trip calls ``detach``/``_to_copy`` and ``lift_fresh``/``_to_copy``, never ``set_``). The emulated device's
tensors have host storage: a ``--from cuda`` script's tie check passed there, and its checkpoints fell back on
``aten::set_.source_Storage``, a call DirectML never makes."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.live  # the emulated device builds against torch 2.4.1 too

_PREFIX = """\
import io, torch
from torch import nn
device = {device}
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 1)).to(device)
"""


#: the device a script names: the emulated one itself, or CUDA's under ``--from cuda`` (``--target dml`` of a script)
_DEVICES = {"privateuseone": 'torch.device("privateuseone", 0)', "cuda": '"cuda"'}


def _scan(tmp_path, backend, body: str, named: str = "privateuseone"):
    from dmlprof import runner

    script = tmp_path / "script.py"
    script.write_text(_PREFIX.format(device=_DEVICES[named]) + body, encoding="utf-8")
    return runner.scan(script, backend=backend, profiler=False, remap_from="cuda" if named == "cuda" else None)


@pytest.mark.parametrize("named", sorted(_DEVICES))
@pytest.mark.parametrize("read", ["model[0].weight.data_ptr() == model[2].weight.data_ptr()",
                                  "sum(p.untyped_storage().nbytes() for p in model.parameters())",
                                  "model[0].weight.storage().size()"])
def test_a_scripts_read_of_a_device_tensors_storage_fails_as_on_directml(tmp_path, emulated_dml_backend, read,
                                                                          named):
    from dmlprof.errors import DeviceError
    from dmlprof.runner import ScanStopped

    with pytest.raises(ScanStopped) as stopped:
        _scan(tmp_path, emulated_dml_backend, f"print({read})\n", named)
    assert stopped.value.exit_code == 4
    assert isinstance(stopped.value.cause, DeviceError) and "have no storage" in str(stopped.value.cause)


def test_has_storage_answers_false_so_a_guarded_read_is_skipped_as_on_directml(tmp_path, emulated_dml_backend,
                                                                               capfd):
    body = ("x = model[0].weight\n"
            "print('guard', torch._C._has_storage(x) and x.data_ptr() != 0, torch._C._has_storage(x.cpu()))\n")
    _scan(tmp_path, emulated_dml_backend, body)
    assert "guard False True" in capfd.readouterr().out


@pytest.mark.parametrize("named", sorted(_DEVICES))  # cuda: map_location="cuda", the run's device
def test_a_checkpoint_round_trip_takes_directmls_path_without_set(tmp_path, emulated_dml_backend, capfd, named):
    body = """\
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(4, 8, device=device)
for _ in range(2):
    loss = model(x).square().mean(); opt.zero_grad(); loss.backward(); opt.step()
    buf = io.BytesIO(); torch.save({"m": model.state_dict(), "opt": opt.state_dict()}, buf); buf.seek(0)
    ck = torch.load(buf, map_location=device); model.load_state_dict(ck["m"]); opt.load_state_dict(ck["opt"])
w = ck["m"]["0.weight"]
print("loaded", w.device.type, torch.equal(w.cpu(), model[0].weight.detach().cpu()),
      ck["opt"]["state"][0]["momentum_buffer"].device.type)
"""
    emulated_dml_backend.reset_fallback_counts()
    _scan(tmp_path, emulated_dml_backend, body, named)
    assert "loaded privateuseone True privateuseone" in capfd.readouterr().out
    assert not [op for op in emulated_dml_backend.fallback_counts() if op.startswith("aten::set_")]


def test_a_deep_copy_copies_each_device_tensor_by_clone_as_on_directml(tmp_path, emulated_dml_backend, capfd):
    """Measured on realdml (re-probe 20, case 13): torch copies torch-directml's storage-less tensors by
    ``clone()``, so a view deep-copied with its base is a tensor of its own; through storage it stayed a view."""
    body = """\
import copy
w = torch.zeros(2, 3, device=device)
copied = copy.deepcopy({"w": w, "row": w[0]})
copied["w"][0].fill_(7)
print("row", float(copied["row"].sum().cpu()))
"""
    _scan(tmp_path, emulated_dml_backend, body)
    assert "row 0.0" in capfd.readouterr().out


def test_outside_a_run_the_emulated_tensors_storage_is_readable(emulated_dml_backend):
    """dmlprof's own uses of the device (tests, the backend's probes) outside a run are left as they were."""
    import torch

    x = torch.ones(3, device=emulated_dml_backend.device())
    assert torch._C._has_storage(x) and x.data_ptr() != 0 and x.untyped_storage().nbytes() == 12


@pytest.mark.parametrize("named", sorted(_DEVICES))
@pytest.mark.parametrize("map_location", ["device", '"cpu"'])
def test_a_weights_only_load_of_a_device_checkpoint_fails_as_on_directml(tmp_path, emulated_dml_backend, named,
                                                                         map_location):
    """Measured on realdml (re-probe 21, case 11): torch 2.4.1 pickles a device tensor from a numpy array, whose
    rebuild its weights-only unpickler refuses, whatever ``map_location``; torch 2.13's host-copy rebuild loaded."""
    from dmlprof.errors import DeviceError
    from dmlprof.runner import ScanStopped

    body = (f"buf = io.BytesIO(); torch.save(model.state_dict(), buf); buf.seek(0)\n"
            f"torch.load(buf, map_location={map_location}, weights_only=True)\n")
    with pytest.raises(ScanStopped) as stopped:
        _scan(tmp_path, emulated_dml_backend, body, named)
    assert stopped.value.exit_code == 4 and isinstance(stopped.value.cause, DeviceError)
    said = f"{stopped.value.cause} {stopped.value.cause.remedy}"
    assert "weights_only=True" in said and "v.cpu()" in said and "weights_only=False" in said


def test_the_fixes_the_weights_only_refusal_names_load_as_on_directml(tmp_path, emulated_dml_backend, capfd):
    """Both measured on realdml: CPU copies loaded with ``weights_only=True`` onto the CPU and copied onto the device
    by ``load_state_dict``; the device's own file loaded with ``weights_only=False``, or unset (torch 2.4.1's
    default is False); a file of CPU tensors alone with ``weights_only=True``."""
    body = """\
buf = io.BytesIO(); torch.save({k: v.cpu() for k, v in model.state_dict().items()}, buf); buf.seek(0)
model.load_state_dict(torch.load(buf, map_location="cpu", weights_only=True))
own = io.BytesIO(); torch.save(model.state_dict(), own)
for kw in ({"weights_only": False}, {}):
    own.seek(0); print("own", torch.load(own, map_location=device, **kw)["0.weight"].device.type, kw)
print("fixed", model[0].weight.device.type)
"""
    _scan(tmp_path, emulated_dml_backend, body)
    out = capfd.readouterr().out
    assert "fixed privateuseone" in out and out.count("own privateuseone") == 2


def test_saving_a_device_tensor_that_requires_grad_fails_in_directmls_words(tmp_path, emulated_dml_backend):
    """Measured on realdml (re-probe 21, case 24): torch 2.4.1 pickles it by ``cpu().numpy()``, which refuses a
    tensor requiring grad (a Parameter pickles its ``.data``: it saves)."""
    from dmlprof.runner import ScanStopped

    body = ("torch.save(model[0].weight, io.BytesIO())\n"
            "torch.save(torch.ones(2, device=device, requires_grad=True), io.BytesIO())\n")
    with pytest.raises(ScanStopped) as stopped:
        _scan(tmp_path, emulated_dml_backend, body)
    assert "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy()" in str(stopped.value.cause)
    assert ":7)" in str(stopped.value.cause)  # the second save's line, as on realdml: the Parameter saved


@pytest.mark.parametrize("named", sorted(_DEVICES))
def test_set_of_an_empty_device_tensor_is_refused_as_the_crash_it_is_on_directml(tmp_path, emulated_dml_backend,
                                                                                   named):
    """Re-probe 22, case 11: ``torch.empty(0, device=d).set_(x)`` dies of SIGSEGV on realdml; it fell back here."""
    from dmlprof.runner import ScanStopped

    body = "x = model[0].weight.detach()\ny = torch.empty(0, device=device).set_(x)\nprint('set', y.shape)\n"
    with pytest.raises(ScanStopped) as stopped:
        _scan(tmp_path, emulated_dml_backend, body, named)
    said = str(stopped.value.cause)
    assert "ends the process" in said and "set_ of an empty device tensor" in said


_SAFETENSORS_LOADS = """\
import os, tempfile
from safetensors.torch import load_file, safe_open, save_file
import safetensors
p = os.path.join(tempfile.mkdtemp(), "m.safetensors"); save_file(nn.Linear(8, 3).state_dict(), p)
def attempt(name, load):
    try:
        print("LOAD", name, "ok", load())
    except Exception as exc:
        print("LOAD", name, type(exc).__name__, exc)
def opened(d, opener=safe_open):
    with opener(p, framework="pt", device=d) as f:
        return f.get_tensor("weight").device.type
for spelling, d in (("str", "cuda"), ("index", "cuda:0"), ("device", torch.device("cuda")), ("int", 0)):
    attempt("load_file/" + spelling, lambda: sorted({v.device.type for v in load_file(p, device=d).values()}))
    attempt("safe_open/" + spelling, lambda: opened(d))
    attempt("package_safe_open/" + spelling, lambda: opened(d, safetensors.safe_open))
m = nn.Linear(8, 3).to(device); m.load_state_dict(load_file(p, device="cpu"))
attempt("fix", lambda: (m.weight.device.type, opened("cpu")))
"""


def test_safetensors_loading_onto_the_device_fails_as_on_directml_under_from_cuda(tmp_path, emulated_dml_backend,
                                                                                  capfd):
    """Re-probe 22, case 13: on realdml safetensors refuses every spelling of the DirectML device ("device
    privateuseone:0 is invalid"); under ``--from cuda`` the script's "cuda" was taken and the load passed."""
    pytest.importorskip("safetensors")
    from dmlprof.backends.errors import match_known_error

    _scan(tmp_path, emulated_dml_backend, _SAFETENSORS_LOADS, "cuda")
    said = {line.split(" ", 2)[1]: line.split(" ", 2)[2] for line in capfd.readouterr().out.splitlines()
            if line.startswith("LOAD ")}
    for how in ("load_file", "safe_open", "package_safe_open"):
        for spelling in ("str", "index", "int"):
            assert said[f"{how}/{spelling}"] == "SafetensorError device privateuseone:0 is invalid"
        assert said[f"{how}/device"] == "SafetensorError device device(type='privateuseone', index=0) is invalid"
    assert said["fix"] == "ok ('privateuseone', 'cpu')"
    assert match_known_error("SafetensorError: device privateuseone:0 is invalid").key == "dml_safetensors_device"
