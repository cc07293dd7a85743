"""Replacements for ops that build, rearrange or sum tensors by index.

``eye``, ``roll``, ``repeat_interleave`` and ``embedding_bag``. Sums by index
go through ``index_put`` with ``accumulate=True`` (:func:`_sum_rows_by`):
``scatter_add``, the obvious choice, keeps the last write instead of the sum
where indices repeat on DirectML (measured on the real torch-directml).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F


def eye(n: int, m: Optional[int] = None, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    """``torch.eye`` from arange and eq (eye.m_out falls back)."""
    m = n if m is None else m
    rows = torch.arange(n, device=device).unsqueeze(1)
    cols = torch.arange(m, device=device).unsqueeze(0)
    out = (rows == cols).to(dtype or torch.get_default_dtype())
    return out.requires_grad_(requires_grad) if requires_grad else out


def roll(input, shifts, dims=None):
    """``torch.roll`` (falls back) as narrow + cat along each dim."""
    if dims is None:
        return roll(input.flatten(), shifts, 0).reshape(input.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ValueError("roll: shifts and dims must have the same length")
    out = input
    for shift, dim in zip(shifts, dims):
        size = out.shape[dim]
        shift = shift % size if size else 0
        if shift:
            out = torch.cat((out.narrow(dim, size - shift, shift), out.narrow(dim, 0, size - shift)), dim)
    return out


def repeat_interleave(input, repeats=None, dim: Optional[int] = None, *, output_size: Optional[int] = None):
    """``torch.repeat_interleave`` (repeat_interleave.Tensor falls back) from expand, cumsum and indexing.

    ``torch.repeat_interleave(repeats)`` (one tensor) returns the index form.
    """
    if repeats is None:  # torch.repeat_interleave(repeats): the indices 0..n-1 each repeated
        return _repeat_index(input, output_size)
    if dim is None:
        input, dim = input.reshape(-1), 0
    dim = dim % max(input.dim(), 1)
    if isinstance(repeats, int) or (isinstance(repeats, torch.Tensor) and repeats.numel() == 1):
        r = int(repeats)
        shape = list(input.shape)
        expanded = input.unsqueeze(dim + 1).expand(*shape[:dim + 1], r, *shape[dim + 1:])
        return expanded.reshape(*shape[:dim], shape[dim] * r, *shape[dim + 1:])
    index = _repeat_index(repeats.to(input.device), output_size)
    # Advanced indexing: its backward is index_put_(accumulate) (native); index_select's is index_add (falls back).
    return input.movedim(dim, 0)[index].movedim(0, dim)


def _repeat_index(repeats, output_size: Optional[int]):
    repeats = repeats.long().reshape(-1)
    total = int(output_size) if output_size is not None else int(repeats.sum())
    starts = repeats.cumsum(0) - repeats
    return _segment_ids(starts, total) - 1


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """``F.embedding_bag`` (sum and mean) from embedding + a sum of rows by bag (index_put with
    accumulate: scatter_add keeps the last write where indices repeat on DirectML); backward is
    embedding_dense_backward and indexing, both native."""
    if mode not in ("sum", "mean") or max_norm is not None or sparse or scale_grad_by_freq:
        raise NotImplementedError("dmlprof embedding_bag: sum/mean, dense, no max_norm")
    emb = F.embedding(input, weight)
    keep = None if padding_idx is None else (input != padding_idx)
    if input.dim() == 2:
        scale = per_sample_weights
        if keep is not None:
            scale = keep.to(emb.dtype) if scale is None else scale * keep.to(emb.dtype)
        summed = (emb * scale.unsqueeze(-1)).sum(1) if scale is not None else emb.sum(1)
        if mode == "sum":
            return summed
        count = keep.sum(1) if keep is not None else torch.full_like(input[:, 0], input.shape[1])
        return summed / count.clamp_min(1).to(emb.dtype).unsqueeze(-1)
    if input.dim() != 1 or offsets is None:
        raise ValueError("embedding_bag: input must be 2-D, or 1-D with offsets")
    total = input.shape[0]
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    bag_of = _segment_ids(offsets[1:bags], total)
    scale = torch.ones_like(input, dtype=emb.dtype) if per_sample_weights is None else per_sample_weights
    # With include_last_offset the last offset should equal len(input); like torch's CPU kernel
    # the last bag runs to the end of the input either way.
    inside = torch.ones_like(input, dtype=torch.bool) if keep is None else keep
    scale = scale * inside.to(emb.dtype)
    bag_of = bag_of.clamp_max(max(bags - 1, 0))
    summed = _sum_rows_by(bag_of, emb * scale.unsqueeze(1), bags)
    if mode == "sum":
        return summed
    count = _sum_rows_by(bag_of, inside.to(emb.dtype), bags)
    return summed / count.clamp_min(1).unsqueeze(1)


def _sum_rows_by(ids, values, rows: int):
    """``out[i] = sum of values[j] where ids[j] == i`` for i < rows: index_put with accumulate (native,
    right where ids repeat on DirectML; scatter_add keeps the last write there)."""
    out = torch.zeros((rows,) + tuple(values.shape[1:]), dtype=values.dtype, device=values.device)
    return out.index_put((ids,), values, accumulate=True)


def _segment_ids(starts, total: int):
    """For positions 0..total-1, how many of ``starts`` are <= the position (a bag or run id)."""
    starts = starts.long().clamp(0, total)
    return _sum_rows_by(starts, torch.ones_like(starts), total + 1).cumsum(0)[:total]
