"""What a CPU fallback costs on a DirectML adapter, and what replacing it saves: the fallback cost model.

A prediction has no times, and the emulated device's are the host CPU's (its "copies" are memcpy), so
neither can say what a fallback costs next to a real GPU. This model prices each fallback call of a step
from what the op frame holds and an adapter class's measured constants
(:class:`dmlprof.tables.adapter_costs.AdapterCosts`):

* **round trip** = every input tensor copied to the host (each copy forces a sync: the d2h curve's fixed
  part), the CPU kernel (the bytes moved over the measured host's throughput), the results copied back
  (the h2d curve, with its sync). An in-place call (``_foreach_lerp_``) copies what it changes back, and an inner ``out=`` call
  (``lerp.Scalar_out``) copies its ``out`` tensor to the host too.
* **saving** = the round trip less what the replacement's own device calls cost: calls it adds
  (:attr:`dmlprof.replacements.catalog.Replacement.added_calls`) x the adapter's cost to issue one call
  into an unsynced step.

Pure: frames and numbers in, numbers out. Checked against steps measured on a GPU by
``benchmarks/fallback_model.py`` (docs/prediction.md, "What a fallback costs").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import pandas as pd

from dmlprof.schema import DEVICE, FALLBACK, parse_fallback_ops
from dmlprof.tables.adapter_costs import AdapterCosts
from dmlprof.tables.wrong_classes import parse_shapes

#: bytes per element by the frame's dtype names (torch-free); an unknown dtype counts as 4
_ITEMSIZE = {"float64": 8, "double": 8, "int64": 8, "long": 8, "complex64": 8, "complex128": 16, "float32": 4,
             "float": 4, "int32": 4, "float16": 2, "half": 2, "bfloat16": 2, "int16": 2, "int8": 1, "uint8": 1,
             "bool": 1}


@dataclass(frozen=True)
class RoundTrip:
    """One fallback call's modelled cost, in microseconds, by part."""

    d2h_us: float
    cpu_us: float
    h2d_us: float

    @property
    def total_us(self) -> float:
        return self.d2h_us + self.cpu_us + self.h2d_us


def itemsize(dtypes: str) -> int:
    """Bytes per element of a call's tensors, from the frame's ``dtypes`` (``float32`` or ``float32,int64``):
    the widest floating dtype among them (a fallback's bulk is its float tensors), else the widest."""
    names = [d for d in str(dtypes or "").split(",") if d]
    floats = [n for n in names if "float" in n or n in ("half", "double")]
    sizes = [_ITEMSIZE.get(n, 4) for n in (floats or names)]
    return max(sizes) if sizes else 4


def input_tensor_bytes(shapes: str, dtypes: str) -> list:
    """Each input tensor's bytes, from the frame's ``shapes`` and ``dtypes`` columns."""
    size = itemsize(dtypes)
    return [math.prod(shape) * size for shape in parse_shapes(shapes)]


def list_length(shapes: Sequence) -> int:
    """How many tensors one list argument of a foreach call holds: the smallest period of its input shapes
    (``_foreach_lerp_(params, grads)``'s shapes repeat after the first list). A call without repeating
    lists is one list: all of it."""
    count = len(shapes)
    for period in range(1, count):
        if count % period == 0 and all(shapes[i] == shapes[i + period] for i in range(count - period)):
            return period
    return count


def device_kernels(ops: pd.DataFrame) -> int:
    """The device calls of a recorded step as the device runs them: a composite foreach (``_foreach_mul_``, a
    loop over its tensors on DirectML) counts once per tensor of its first list."""
    on_device = ops[ops["verdict"] == DEVICE]
    return int(sum(list_length(parse_shapes(shapes)) if op.startswith("aten::_foreach_") else 1
                   for op, shapes in zip(on_device["op"], on_device["shapes"])))


def round_trip(op: str, fallback_ops: str, shapes: str, dtypes: str, bytes_moved: int,
               costs: AdapterCosts, cpu_us: Optional[float] = None) -> RoundTrip:
    """The modelled round trip of one fallback call (a row of the op frame). ``cpu_us``: the CPU kernel's
    time where it was measured on the adapter's host; None prices it as the bytes moved over that host's
    measured throughput."""
    inputs = input_tensor_bytes(shapes, dtypes)
    inner = parse_fallback_ops(fallback_ops)
    mutated = _mutated(op, inputs, sum(inner.values()))
    if any(_is_out_variant(name) for name in inner or (op,)):
        inputs = inputs + mutated  # the out= argument goes to the host as well, before the kernel writes it
    results = max(int(bytes_moved) - sum(input_tensor_bytes(shapes, dtypes)), 0)
    d2h = sum(costs.d2h.us(n) for n in inputs)
    h2d = sum(costs.h2d.us(n) for n in mutated) + (costs.h2d.us(results) if results else 0.0)
    if cpu_us is None:
        cpu_us = int(bytes_moved) / costs.cpu_kernel_bytes_per_us
    return RoundTrip(d2h, float(cpu_us), h2d)


def _mutated(op: str, inputs: list, inner_calls: int) -> list:
    """The input tensors an in-place call changes, which go back to the device: its first argument (a
    foreach's first list)."""
    if not _base(op).endswith("_") or not inputs:
        return []
    if _base(op).startswith("aten::_foreach_"):
        return inputs[:inner_calls or 1]
    return inputs[:1]


def _base(op: str) -> str:
    return op.split(".", 1)[0]


def _is_out_variant(op: str) -> bool:
    overload = op.split(".", 1)[1] if "." in op else ""
    return overload == "out" or overload.endswith("_out")


def fallback_round_trips(ops: pd.DataFrame, costs: AdapterCosts) -> pd.DataFrame:
    """One row per fallback call: ``seq``, ``op``, ``phase`` and the modelled ``d2h_us``, ``cpu_us``,
    ``h2d_us``, ``round_trip_us``. The CPU kernel is priced from the bytes moved on the measured host, in a
    prediction and on the emulated device alike: the emulated device's fallback time is its own machinery's on
    this machine's CPU (a GroupNorm backward took 37 ms there under load, 0.19 ms on the GPU's host)."""
    fallen = ops[ops["verdict"] == FALLBACK]
    rows = []
    for r in fallen.itertuples():
        trip = _round_trip_once(r.op, r.fallback_ops, r.shapes, r.dtypes, int(r.bytes_moved), costs)
        rows.append((r.seq, r.op, r.phase, trip.d2h_us, trip.cpu_us, trip.h2d_us, trip.total_us))
    return pd.DataFrame(rows, columns=["seq", "op", "phase", "d2h_us", "cpu_us", "h2d_us", "round_trip_us"])


#: a step's fallback calls repeat with the same arguments every step: each priced once
_round_trip_once = lru_cache(maxsize=4096)(round_trip)


def device_calls_added_ms(added_calls: float, costs: AdapterCosts) -> float:
    """What ``added_calls`` more device calls cost a step on this adapter class, in milliseconds."""
    return added_calls * costs.queued_call_us / 1e3


def saving_ms(round_trip_ms: float, added_calls: Optional[float], costs: AdapterCosts) -> Optional[float]:
    """A fallback's round trip less its replacement's added device calls; None where the calls are unknown."""
    if added_calls is None:
        return None
    return round_trip_ms - device_calls_added_ms(added_calls, costs)
