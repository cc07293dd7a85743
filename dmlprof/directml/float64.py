"""Where an adapter without float64 refuses it: at the first DirectML operator that computes on a float64 device
tensor, not where one is made.

Measured on realdml (lavapipe has no float64; docs/realdml.md, one call per fresh process): a float64 tensor can be
made on the device (``empty``/``empty_like``/``new_empty_strided``), viewed (``view``, ``t``, slicing, ``select``,
``unsqueeze``, ``expand``, ``reshape`` of a contiguous one), indexed by a tensor (``x[idx]``), filled with random
values (``rand_like``/``randn``) and moved between host and device either way (a float64 CPU tensor's ``.to(device)``,
the device tensor's ``.cpu()``, strided or not: the values come back whole). Everything that runs a DirectML
operator on one raises "does not support Double": fills (``zeros``/``ones``/``full``/``fill_``), copies on the
device (``clone``, ``contiguous()`` of a strided view, ``copy_`` between two device tensors, a cast to or from
float64 there: ``.double()`` of float32, float16, int32 or int64, ``.float()``, ``.long()``; a cast from or to
bool or uint8 runs), ``cat``/``stack``, ``index_select``, arithmetic, reductions, ``mm``.

The prediction's stand-in and the emulated device both ask :func:`refuses_float64` at each kernel, with the
call's tensors (before it runs) and its outputs (after: a factory's ``dtype=`` shows there), so each path
refuses at the call real DirectML refuses and runs the calls it runs.
"""
from __future__ import annotations

from typing import Iterable

import torch

#: torch-directml's refusal of float64, raised where an adapter has none
FLOAT64_MESSAGE = "The GPU device does not support Double (Float64) operations!"

#: ops that make, view, index or randomly fill a float64 device tensor without a DirectML operator refusing it
_RUNS = frozenset(f"aten::{name}" for name in (
    # allocation (no values written)
    "empty.memory_format", "empty_strided", "new_empty_strided", "new_empty", "empty_like", "resize_",
    # views (the same memory, another geometry)
    "view", "as_strided", "_reshape_alias", "reshape", "t", "transpose.int", "select.int", "slice.Tensor", "unsqueeze",
    "squeeze", "squeeze.dim", "squeeze.dims", "expand", "permute", "alias", "detach", "unfold", "diagonal",
    "narrow", "split.Tensor", "split_with_sizes", "unbind.int", "chunk", "_unsafe_view", "view_as", "expand_as",
    "lift_fresh",
    # random fills (rand_like, randn) and indexing by a tensor (x[idx]): measured to run
    "uniform_", "normal_", "index.Tensor", "index.Tensor_out", "masked_select",
    # a value read back to the host (x.item()): a copy off the device
    "_local_scalar_dense",
))

#: copies: they run between host and device (either way, strided or not) and refuse on the device (a clone,
#: a cast to or from float64, ``copy_`` between two device tensors)
_COPIES = frozenset({"aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::_to_copy"})


#: a cast on the device between float64 and one of these runs (measured: bool and uint8 either way; int32, int64
#: and float16 to float64, float64 to int64 and float16, raise)
_ONE_BYTE_CASTS = frozenset({torch.bool, torch.uint8})


def _tensors(values) -> Iterable[torch.Tensor]:
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from _tensors(value)


def refuses_float64(name: str, values, device_type: str, outputs: bool = False) -> bool:
    """Whether an adapter without float64 refuses this call of ``name``: a float64 tensor on the device among
    ``values`` (the call's arguments, or with ``outputs`` its results) and an op that computes on it."""
    tensors = list(_tensors(values))
    if not any(t.dtype == torch.float64 and t.device.type == device_type for t in tensors):
        return False
    if name in _RUNS:
        return False
    if name in _COPIES:
        # a copy's destination alone is its output: judged with its source, before it ran
        if outputs or not all(t.device.type == device_type for t in tensors):
            return False
        return not any(t.dtype in _ONE_BYTE_CASTS for t in tensors)
    return True
