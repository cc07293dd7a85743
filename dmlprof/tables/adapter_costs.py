"""What a fallback's copies and a device call cost on a DirectML adapter class: measured constants as data.

``data/adapter_costs.json`` holds, per adapter class, micro-benchmark figures measured on the device
(copies each way at several sizes, the cost of issuing one device call into an unsynced step, the host
CPU's throughput on a fallback's kernel), each with the file it was read from. The fallback cost model
(:mod:`dmlprof.analysis.fallback_cost`) prices a step's fallbacks with them. Torch-free: a prediction and a
re-rendered report read them. The constants are never fitted to a step's measured saving: that saving is
what ``benchmarks/fallback_model.py`` checks the model against.
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Tuple

from dmlprof.tables import DATA_DIR

ADAPTER_COSTS_FILE = "adapter_costs.json"
FORMAT = "dmlprof-adapter-costs"


@dataclass(frozen=True)
class CopyCurve:
    """A copy's time against its size, from measured (bytes, microseconds) points: linear between two points,
    the last two points' slope beyond the largest, the first point's time below the smallest."""

    points: Tuple[Tuple[int, float], ...]

    def us(self, nbytes: int) -> float:
        sizes = [size for size, _ in self.points]
        if nbytes <= sizes[0]:
            return self.points[0][1]
        index = min(max(bisect.bisect_left(sizes, nbytes), 1), len(sizes) - 1)
        (lo_bytes, lo_us), (hi_bytes, hi_us) = self.points[index - 1], self.points[index]
        return lo_us + (nbytes - lo_bytes) * (hi_us - lo_us) / (hi_bytes - lo_bytes)


@dataclass(frozen=True)
class AdapterCosts:
    """One adapter class's measured constants (see ``data/adapter_costs.json`` for where each was measured)."""

    key: str
    name: str
    measured: str
    #: a device->host copy of one tensor; its fixed part is the sync the copy forces
    d2h: CopyCurve
    #: a host->device copy of one tensor, with the synchronize that completes it
    h2d: CopyCurve
    #: issuing one more device call into an unsynced step (the device keeps up with small ones)
    queued_call_us: float
    #: the host CPU's throughput on a fallback's kernel, in bytes moved per microsecond (a prediction has no times)
    cpu_kernel_bytes_per_us: float
    sources: Tuple[str, ...] = ()


@lru_cache(maxsize=None)
def load_adapter_costs(key: Optional[str] = None) -> AdapterCosts:
    """The constants of adapter class ``key`` (None: the reference class, the one a prediction and the emulated
    device are priced on). Raises KeyError for a class the file does not hold."""
    data = json.loads((DATA_DIR / ADAPTER_COSTS_FILE).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{ADAPTER_COSTS_FILE} is not a {FORMAT} file")
    key = key or data["reference"]
    entry = data["classes"][key]
    return AdapterCosts(
        key=key, name=entry["name"], measured=entry["measured"],
        d2h=CopyCurve(tuple((int(b), float(us)) for b, us in entry["d2h_us"]["points"])),
        h2d=CopyCurve(tuple((int(b), float(us)) for b, us in entry["h2d_us"]["points"])),
        queued_call_us=float(entry["queued_call_us"]), cpu_kernel_bytes_per_us=float(entry["cpu_kernel_bytes_per_us"]),
        sources=(entry["d2h_us"]["from"], entry["h2d_us"]["from"], entry["queued_call_from"], entry["cpu_kernel_from"]))
