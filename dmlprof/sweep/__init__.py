"""Batch-size sweeps: throughput, step time, peak memory and fallback share per size.

Each size runs in a fresh child process (:mod:`dmlprof.sweep.child`) so an
out-of-memory cannot poison the next one; :func:`run_sweep` drives them and
returns a :class:`SweepResult`, whose :meth:`~SweepResult.to_session` is a
Session with the sweep in ``extras["sweep"]`` (schema: docs/sweep_schema.md).
The report renders it like any session (``dmlprof.render``).
"""
from importlib import import_module

# Loaded on first use: ``python -m dmlprof.sweep.child`` imports this package
# first, and must not import the child module (and the driver) a second time.
_EXPORTS = {
    "SweepResult": "dmlprof.sweep.driver",
    "run_sweep": "dmlprof.sweep.driver",
    "MemoryBudget": "dmlprof.sweep.options",
    "parse_batch_sizes": "dmlprof.sweep.options",
    "parse_bytes": "dmlprof.sweep.options",
    "parse_memory_budget": "dmlprof.sweep.options",
}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'dmlprof.sweep' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
