"""What the prediction knows of a storage's values, and the budget it keeps them within (``ValueStore``).

The store keys what it knows by the storage's address, so any tensor on the
storage reads it; here ordinary CPU tensors stand for the device's.
"""
from __future__ import annotations

import gc

import torch

from dmlprof.predict.values import ValueStore


def _values(nbytes: int) -> torch.Tensor:
    return torch.zeros(nbytes, dtype=torch.uint8)


def test_every_view_and_alias_of_a_storage_reads_its_values():
    store = ValueStore()
    device = torch.empty(4, 3)
    assert store.keep(device, torch.arange(12.0)) is None
    for alias in (device.t(), device.detach(), device.data, device[1:], torch.nn.Parameter(device)):
        assert store.values_of(alias) is not None
    assert store.values_of(torch.empty(4, 3)) is None


def test_values_past_the_byte_budget_are_refused_with_the_reason_and_forgotten():
    store = ValueStore(max_bytes=100)
    kept, refused = torch.empty(10), torch.empty(100)
    assert store.keep(kept, _values(60)) is None
    why = store.keep(refused, _values(60))
    assert why is not None and "budget" in why and store.exhausted == why
    assert store.values_of(refused) is None and store.entry(refused).why == why
    assert store.live_bytes == 60


def test_a_storage_made_at_a_freed_ones_address_knows_nothing_of_it():
    store = ValueStore()
    device = torch.empty(3)
    store.keep(device, _values(12))
    store.born(device, 12)  # what the stand-in says when it makes a storage at this address
    assert store.values_of(device) is None and store.live_bytes == 0


def test_values_no_tensor_holds_any_more_are_dropped_when_the_budget_is_short():
    store = ValueStore(max_bytes=1000)
    alive = [torch.empty(1) for _ in range(300)]  # more storages than the store makes between two looks
    for tensor in alive:
        store.keep(tensor, _values(1))
    orphan = torch.empty(1)
    store.keep(orphan, _values(600))
    del orphan
    gc.collect()
    assert store.keep(torch.empty(1), _values(600)) is None  # room made by forgetting the freed one


def test_an_op_past_the_time_or_size_budget_is_not_computed():
    store = ValueStore(max_s=1.0, max_op_elements=10)
    assert store.refuses_op(10) is None
    assert "elements" in store.refuses_op(11)
    store.spent_s = 2.0
    assert "s of CPU kernels" in store.refuses_op(1)
    assert "off" in ValueStore(max_bytes=0).refuses_op(1)
