"""What each ``--target`` other than DirectML does with a call, one semantics module per target.

A target is data plus semantics: its table (``dmlprof/tables/data/targets/<target>-torch<version>.json``,
written by ``tools/target_tables.py`` from a torch wheel) and a module here named after it, holding a
``Semantics`` class (a :class:`~dmlprof.targets.base.TargetSemantics`). Nothing else names a target: the CLI's
choices, the prediction and the reports find it by its table and this module (docs/targets.md).
"""
from __future__ import annotations

from importlib import import_module
from typing import Mapping, Optional

from dmlprof.tables.targets import load_target_table, shipped_target_tables


def target_names() -> tuple:
    """The targets a table was shipped for (their semantics modules live beside this one)."""
    return tuple(shipped_target_tables())


def semantics_for(target: str, torch_version: Optional[str] = None, environ: Optional[Mapping[str, str]] = None):
    """The target's semantics over its table for ``torch_version`` (None: the newest), in ``environ``'s
    settings (None: this process's environment); raises UsageError for a target without a table."""
    table = load_target_table(target, torch_version)
    module = import_module(f"{__name__}.{target}")
    return module.Semantics(table, environ)


__all__ = ["semantics_for", "target_names"]
