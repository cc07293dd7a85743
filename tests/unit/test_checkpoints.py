"""torch.save and torch.load of device tensors on the emulated device, as on a real one (re-probe 12: the save
failed at aten::set_.source_Storage and left a truncated checkpoint)."""
from __future__ import annotations

import torch


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
