"""Replacements for reductions and scans: var/std/var_mean, cumprod, count_nonzero, bucketize.

Their DirectML kernels (``std.correction``, ``var_mean.correction``,
``cumprod.out``, ``count_nonzero.dim_IntList``, ``bucketize``) fall back;
``var.correction``, ``sum`` and multiplies do not.
"""
from __future__ import annotations

import torch


def cumprod(input, dim: int, *, dtype=None):
    """``torch.cumprod`` as a log-depth scan of multiplies (cumprod.out falls back).

    Exact with zeros and signs, and autograd through the multiplies gives the
    true gradient (also at zeros).
    """
    x = input.to(dtype) if dtype is not None else input
    if x.dim() == 0:
        return x.clone()
    dim = dim % x.dim()
    length = x.shape[dim]
    k = 1
    while k < length:
        head = torch.ones_like(x.narrow(dim, 0, k))
        x = x * torch.cat((head, x.narrow(dim, 0, length - k)), dim)
        k *= 2
    return x


def count_nonzero(input, dim=None):
    """``torch.count_nonzero`` as ``(x != 0).sum(dim)`` (count_nonzero.dim_IntList falls back)."""
    nonzero = input != 0
    if dim is None:
        return nonzero.sum()
    return nonzero.sum(dim)


def _variance_args(args, kwargs):
    """Normalise torch.std/var/var_mean arguments to (dim, correction, keepdim)."""
    kwargs = dict(kwargs)
    dim = kwargs.pop("dim", None)
    unbiased = kwargs.pop("unbiased", None)
    correction = kwargs.pop("correction", None)
    keepdim = kwargs.pop("keepdim", False)
    if kwargs:
        raise NotImplementedError(f"unsupported arguments {sorted(kwargs)}")
    args = list(args)
    if args and isinstance(args[0], bool):  # std(input, unbiased)
        unbiased = args.pop(0)
    elif args:
        dim = args.pop(0)
    if args:
        unbiased = args.pop(0)
    if args:
        keepdim = args.pop(0)
    if args:
        raise NotImplementedError("too many positional arguments")
    if correction is None:
        correction = 1 if unbiased is None else int(bool(unbiased))
    return dim, correction, bool(keepdim)


def var(input, *args, **kwargs):
    """``torch.var`` through var.correction (native)."""
    dim, correction, keepdim = _variance_args(args, kwargs)
    if dim is None:
        return torch.var(input, correction=correction, keepdim=keepdim) if keepdim else torch.var(input, correction=correction)
    return torch.var(input, dim, correction=correction, keepdim=keepdim)


def std(input, *args, **kwargs):
    """``torch.std`` as ``sqrt(var)`` (std.correction falls back; var.correction and sqrt are native)."""
    return var(input, *args, **kwargs).sqrt()


def var_mean(input, *args, **kwargs):
    """``torch.var_mean`` as ``(var, mean)`` (var_mean.correction falls back)."""
    dim, correction, keepdim = _variance_args(args, kwargs)
    if dim is None:
        mean = input.mean()
        if keepdim:
            mean = mean.reshape([1] * input.dim())
        return var(input, correction=correction, keepdim=keepdim), mean
    return torch.var(input, dim, correction=correction, keepdim=keepdim), input.mean(dim, keepdim=keepdim)


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """``torch.bucketize`` (falls back) by counting boundaries below each value (memory: values x boundaries)."""
    if boundaries.dim() != 1:
        raise NotImplementedError("bucketize: 1-D boundaries only")
    below = (input.unsqueeze(-1) >= boundaries) if right else (input.unsqueeze(-1) > boundaries)
    return below.sum(-1).to(torch.int32 if out_int32 else torch.int64)
