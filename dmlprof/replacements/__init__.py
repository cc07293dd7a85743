"""Replacements for ops that fall back to the CPU on DirectML, and how to apply them.

A library, a leaf of the house (it imports nothing of dmlprof's but the op
tables and errors):

* :mod:`dmlprof.replacements.ops` and :mod:`dmlprof.replacements.fft`: the
  replacements, built only from ops with native DirectML kernels (each one
  gradchecked against torch and run on the emulated DirectML device with zero
  fallback calls, see ``tests/unit/test_replacements.py``);
* :func:`patch` (also ``dmlprof.patch``): swap a model's modules, functional
  calls and optimizer step for them, undoably; :func:`replaced`: the same for
  a block of code; :func:`patch_optimizer`: the optimizer alone, state kept;
* :mod:`dmlprof.replacements.catalog` (torch-free): :func:`advice_for` /
  :func:`advice_for_hotspot`, for a fallback op the one line the reports
  print: which replacement removes it and how to apply it.

``scan --replace`` (scan, patch, scan again) is :mod:`dmlprof.replaced_scan`;
its comparison is :mod:`dmlprof.analysis.replace`.
"""
from __future__ import annotations

from dmlprof.replacements.catalog import CATALOG, Replacement, advice_for, advice_for_hotspot, replacement_for


def patch(model=None, optimizer=None):
    """See :func:`dmlprof.replacements.patching.patch`."""
    from dmlprof.replacements.patching import patch as _patch

    return _patch(model, optimizer)


def patch_optimizer(optimizer):
    """See :func:`dmlprof.replacements.patching.patch_optimizer`."""
    from dmlprof.replacements.patching import patch_optimizer as _patch_optimizer

    return _patch_optimizer(optimizer)


def replaced():
    """See :func:`dmlprof.replacements.patching.replaced`."""
    from dmlprof.replacements.patching import replaced as _replaced

    return _replaced()


__all__ = ["CATALOG", "Replacement", "replacement_for", "advice_for", "advice_for_hotspot", "patch",
           "patch_optimizer", "replaced"]
