"""Replacements for what optimizers' steps call: lerp and the ``_foreach_`` ops.

Adam and AdamW update their first moment with ``lerp`` (``_foreach_lerp_`` on
the foreach path); Adamax and ``Adam(amsgrad=True)`` take a running maximum
with ``_foreach_maximum_``. On DirectML these reach ``lerp.*_out`` and
``clamp_min/max.Tensor_out``, which fall back, so every training step pays
for them once per parameter; these versions use foreach mul/add and
``maximum.out``/``minimum.out``, which are native.
"""
from __future__ import annotations

import numbers

import torch


def lerp(start: torch.Tensor, end: torch.Tensor, weight) -> torch.Tensor:
    """``torch.lerp`` as ``start + weight * (end - start)`` (lerp.*_out falls back on DirectML)."""
    return start + weight * (end - start)


def lerp_(start: torch.Tensor, end: torch.Tensor, weight) -> torch.Tensor:
    """In-place ``Tensor.lerp_`` from mul/add (what Adam's single-tensor path calls)."""
    if isinstance(weight, torch.Tensor):
        return start.addcmul_(end - start, weight)
    return start.mul_(1.0 - weight).add_(end, alpha=weight)


def foreach_lerp_(starts, ends, weight) -> None:
    """``torch._foreach_lerp_`` (Adam/AdamW's first-moment update) as foreach mul/add."""
    if isinstance(weight, numbers.Number) or (isinstance(weight, torch.Tensor) and weight.dim() == 0
                                               and weight.device.type == "cpu"):
        w = float(weight)
        torch._foreach_mul_(starts, 1.0 - w)
        torch._foreach_add_(starts, ends, alpha=w)
        return None
    weights = list(weight) if not isinstance(weight, torch.Tensor) else [weight] * len(starts)
    for start, end, w in zip(starts, ends, weights):
        lerp_(start, end, w)
    return None


def foreach_lerp(starts, ends, weight) -> list:
    """Out-of-place ``torch._foreach_lerp``."""
    outs = [s.clone() for s in starts]
    foreach_lerp_(outs, ends, weight)
    return outs


def foreach_maximum_(selfs, others) -> None:
    """``torch._foreach_maximum_`` with a tensor list (Adamax, Adam(amsgrad=True)); torch's per-tensor
    loop reaches clamp_min.Tensor_out, which falls back. ``maximum.out`` is native."""
    _foreach_binary_(selfs, others, torch.maximum)


def foreach_minimum_(selfs, others) -> None:
    """``torch._foreach_minimum_`` with a tensor list (the loop reaches clamp_max.Tensor_out)."""
    _foreach_binary_(selfs, others, torch.minimum)


def _foreach_binary_(selfs, others, fn) -> None:
    if isinstance(others, (int, float)) or (isinstance(others, (list, tuple)) and others
                                             and not isinstance(others[0], torch.Tensor)):
        raise NotImplementedError("scalar operands reach native clamp kernels already")
    for a, b in zip(selfs, others):
        a.copy_(fn(a, b))
    return None
