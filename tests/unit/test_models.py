"""Every file in models/ keeps the model contract and trains one step on the CPU."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from dmlprof.model_file import import_model_module, inspect_model_file
from dmlprof.runner import default_loss

# not from conftest: collected after tests/realdml, whose conftest.py then answers 'import conftest'
MODELS = Path(__file__).resolve().parents[2] / "models"

MODEL_FILES = sorted(p for p in MODELS.glob("*.py") if not p.name.startswith("_"))
SMALL_BATCH = 2


def _load(path):
    assert inspect_model_file(path).mode == "contract"
    return import_model_module(path)


def _as_tuple(inputs):
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def test_models_folder_holds_the_six_models():
    names = {p.stem for p in MODEL_FILES}
    assert {"lenet5", "resnet18", "vit_tiny", "lstm_forecaster", "recommender", "groupnorm_net"} <= names


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_one_training_step_gives_a_finite_loss_and_every_gradient(path):
    module = _load(path)
    model = module.build_model()
    assert isinstance(model, torch.nn.Module)
    model.train()
    inputs, target = module.make_batch(SMALL_BATCH)
    output = model(*_as_tuple(inputs))
    loss_fn = getattr(module, "loss_fn", None) or default_loss
    loss = loss_fn(output, target)
    assert loss.dim() == 0
    assert math.isfinite(loss.item())
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, f"no gradient for {missing}"
    for name, p in model.named_parameters():
        if p.grad is not None:
            assert torch.isfinite(p.grad).all(), name
    if hasattr(module, "make_optimizer"):
        optimizer = module.make_optimizer(model.parameters())
        assert isinstance(optimizer, torch.optim.Optimizer)
        before = [p.detach().clone() for p in model.parameters()]
        optimizer.step()
        assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_make_batch_gives_deterministic_cpu_tensors(path):
    module = _load(path)
    first_inputs, first_target = module.make_batch(SMALL_BATCH)
    second_inputs, second_target = module.make_batch(SMALL_BATCH)
    first = _as_tuple(first_inputs) + (first_target,)
    second = _as_tuple(second_inputs) + (second_target,)
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert isinstance(a, torch.Tensor) and a.device.type == "cpu"
        assert torch.equal(a, b)


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_build_model_is_seeded(path):
    module = _load(path)
    first = module.build_model().state_dict()
    second = module.build_model().state_dict()
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), key
