"""Pure functions over the op frame: ``DataFrame -> DataFrame`` (or a dict).

No printing, plotting or I/O here; the report (:mod:`dmlprof.report`) calls
these once and every renderer formats what it computed.
"""
from dmlprof.analysis.core import (
    calls_after,
    cpu_hotspots,
    device_calls_by_op,
    fallback_hotspots,
    fallback_op_set,
    module_summary,
    op_summary,
    phase_split,
    profiler_crosscheck,
    range_summary,
    split_fixed_cost,
    summary,
    time_by_op,
    transfer_hotspots,
)

__all__ = ["calls_after", "cpu_hotspots", "device_calls_by_op", "summary", "op_summary", "fallback_hotspots", "fallback_op_set", "phase_split",
           "module_summary", "transfer_hotspots", "profiler_crosscheck", "range_summary", "split_fixed_cost", "time_by_op"]
