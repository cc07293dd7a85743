"""Pure functions over the op frame: ``DataFrame -> DataFrame`` (or a dict).

No printing, plotting or I/O here; renderers call these and format.
"""
from dmlprof.analysis.core import (
    cpu_hotspots,
    fallback_hotspots,
    module_summary,
    op_summary,
    phase_split,
    profiler_crosscheck,
    summary,
    transfer_hotspots,
)

__all__ = ["cpu_hotspots", "summary", "op_summary", "fallback_hotspots", "phase_split", "module_summary", "transfer_hotspots", "profiler_crosscheck"]
