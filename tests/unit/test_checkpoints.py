"""torch.save and torch.load of device tensors on the emulated device, as on a real one (re-probe 12: the save
failed at aten::set_.source_Storage and left a truncated checkpoint)."""
from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.live  # torch.save pickles a device tensor differently on torch 2.4 (numpy) and later


def test_device_tensors_save_and_load_back_onto_the_host_and_the_device(tmp_path, emulated_dml_backend):
    device = emulated_dml_backend.device()
    weight = torch.randn(2, 3).to(device)
    state = {"weight": weight, "columns": weight[:, 1:]}  # a view: saved with its storage's offset
    path = tmp_path / "w.pt"
    torch.save(state, path)
    on_host = torch.load(path, map_location="cpu", weights_only=True)
    assert torch.equal(on_host["weight"], weight.cpu()) and torch.equal(on_host["columns"], weight.cpu()[:, 1:])
    on_device = torch.load(path, map_location=device, weights_only=True)
    assert on_device["weight"].device == torch.device(device)
    assert torch.equal(on_device["columns"].cpu(), weight.cpu()[:, 1:])


def test_prediction_tensors_save_as_torch_directml_s_and_load_as_ordinary_tensors():
    """Re-probe 12, case 46 under the prediction (``--target dml`` of a model file; ``--target xpu``/``mps``, which
    pickle by storage: tests/unit/test_target_checkpoints.py): the
    stand-in's tensors failed torch.save ("Attempted to access the data pointer on an invalid python storage"). They
    save as torch saves torch-directml's storage-less tensors, by their host copy: the values the stand-in holds, 0
    where it holds none (a made-up value, reported as one), and nothing of dmlprof's in the file. In a process of
    its own: the stand-in's kernels would replace the emulated device's loaded here."""
    import subprocess
    import sys
    import textwrap

    probe = textwrap.dedent("""
        import io, torch
        from dmlprof.predict.device import device_name, ensure_device
        from dmlprof.predict.standin import StandIn
        from dmlprof.predict.values import ValueStore
        from dmlprof.tables import load_table
        ensure_device()
        device = torch.device(device_name(), 0)
        standin = StandIn(load_table("dml"), [], device_name())
        standin.install()
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2).to(device)
        optimizer = torch.optim.Adam(model.parameters())
        for parameter in model.parameters():
            parameter.grad = torch.ones_like(parameter)
        optimizer.step()
        weight = model.weight.detach().cpu()
        checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "columns": model.weight.detach()[:, 1:], "steps": torch.tensor([3, 4]).to(device)}
        saved = io.BytesIO()
        torch.save(checkpoint, saved)
        assert b"dmlprof" not in saved.getvalue(), "dmlprof's own objects pickled into the user's file"
        on_host = torch.load(io.BytesIO(saved.getvalue()), map_location="cpu")
        assert on_host["model"]["weight"].device.type == "cpu" and torch.equal(on_host["model"]["weight"], weight)
        assert torch.equal(on_host["columns"], weight[:, 1:]) and on_host["steps"].tolist() == [3, 4]
        moment = on_host["optimizer"]["state"][0]["exp_avg"]
        assert moment.dtype == torch.float32 and torch.allclose(moment, torch.full((2, 4), 0.1))
        on_device = torch.load(io.BytesIO(saved.getvalue()), map_location=device)
        assert on_device["model"]["bias"].device == device and torch.equal(on_device["columns"].cpu(), weight[:, 1:])
        assert standin.first_guess is None, standin.first_guess
        standin.remove()
        blind = StandIn(load_table("dml"), [], device_name(), values=ValueStore(max_bytes=0))
        blind.install()
        unknown = torch.randn(2, 3).to(device) * 2
        saved = io.BytesIO()
        torch.save(unknown, saved)
        assert torch.equal(torch.load(io.BytesIO(saved.getvalue()), map_location="cpu"), torch.zeros(2, 3))
        assert blind.first_guess is not None and blind.first_guess.op == "aten::copy_", blind.first_guess
        print("ok")
        """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the remapping's target here is the CPU, with no CUDA")
def test_a_cuda_scripts_checkpoint_resumes_under_from_cuda(tmp_path):
    """A CUDA resume script under ``--from cuda`` (``--target dml`` of a script): ``torch.load(path,
    map_location=device)`` with ``device = "cuda"`` failed "Expected a cuda device, but got: privateuseone:0"
    (torch.cuda's device-index check, reached by torch.serialization's), and ``torch.device("cuda", 0)``
    failed "argument 'type' must be str, not torch.device"."""
    from dmlprof.backends.cpu import CpuBackend
    from dmlprof.backends.remap import remapped

    path = tmp_path / "ckpt.pt"
    with remapped("cuda", CpuBackend()):
        device = "cuda" if torch.cuda.is_available() else "cpu"
        weight = torch.randn(2, 3, device=device)
        torch.save({"weight": weight}, path)
        by_name = torch.load(path, map_location=device)["weight"]
        by_device = torch.load(path, map_location=torch.device("cuda", 0))["weight"]
        chosen = torch.device(device, 0)
    assert by_name.device == by_device.device == chosen == weight.device
    assert torch.equal(by_name, weight) and torch.equal(by_device, weight)
