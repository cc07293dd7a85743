"""Replacements for elementwise ops: activations, clamping, rounding and friends.

Each is one formula in ``where``, ``expm1``, ``softplus``, ``sigmoid``,
``floor``/``ceil`` or ``log``, all native on DirectML, standing in for a
kernel (``elu.out``, ``clamp.Tensor_out``, ``trunc.out``, ...) that falls back.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F


def logsigmoid(input):
    """``F.logsigmoid`` as ``-softplus(-x)`` (log_sigmoid_forward/backward fall back; softplus is native)."""
    return -F.softplus(-input)


def clamp(input, min=None, max=None):
    """``torch.clamp`` with tensor bounds (clamp.Tensor_out falls back) from where; gradients
    route like clamp's (to the input inside the bounds, to the bound outside)."""
    out = input
    if min is not None:
        out = torch.where(out < min, min, out)
    if max is not None:
        out = torch.where(out > max, max, out)
    return out


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """``F.elu`` as ``where(x > 0, x, alpha * expm1(x))`` (elu.out falls back)."""
    out = torch.where(input > 0, input, alpha * torch.expm1(input))
    if inplace:
        return input.copy_(out)
    return out


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace: bool = False):
    """``F.selu`` (reaches elu.out, which falls back) from where + expm1."""
    out = _SELU_SCALE * torch.where(input > 0, input, _SELU_ALPHA * torch.expm1(input))
    return input.copy_(out) if inplace else out


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """``F.celu`` (reaches elu.out, which falls back) from where + expm1."""
    out = torch.where(input > 0, input, alpha * torch.expm1(input / alpha))
    return input.copy_(out) if inplace else out


def softshrink(input, lambd: float = 0.5):
    """``F.softshrink`` (softshrink.out falls back) from where."""
    zero = torch.zeros_like(input)
    return torch.where(input > lambd, input - lambd, torch.where(input < -lambd, input + lambd, zero))


def hardshrink(input, lambd: float = 0.5):
    """``F.hardshrink`` (hardshrink.out falls back) from where."""
    return torch.where((input > lambd) | (input < -lambd), input, torch.zeros_like(input))


def glu(input, dim: int = -1):
    """``F.glu`` as ``a * sigmoid(b)`` (glu.out and glu_backward fall back)."""
    a, b = input.chunk(2, dim)
    return a * torch.sigmoid(b)


def mish(input, inplace: bool = False):
    """``F.mish`` as ``x * tanh(softplus(x))`` (mish.out falls back)."""
    out = input * torch.tanh(F.softplus(input))
    return input.copy_(out) if inplace else out


def trunc(input):
    """``torch.trunc`` (trunc.out falls back) from floor and ceil."""
    if not input.is_floating_point():
        return input.clone()
    return torch.where(input >= 0, torch.floor(input), torch.ceil(input))


def frac(input):
    """``torch.frac`` (frac.out falls back) as ``x - trunc(x)``."""
    return input - trunc(input)


def nan_to_num(input, nan: float = 0.0, posinf: Optional[float] = None, neginf: Optional[float] = None):
    """``torch.nan_to_num`` (nan_to_num.out falls back) from isnan, isinf and where."""
    if not input.is_floating_point():
        return input.clone()
    info = torch.finfo(input.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = torch.where(torch.isnan(input), torch.full_like(input, nan), input)
    out = torch.where(input == math.inf, torch.full_like(input, posinf), out)
    return torch.where(input == -math.inf, torch.full_like(input, neginf), out)


def logit(input, eps: Optional[float] = None):
    """``torch.logit`` (falls back) as ``log(p) - log1p(-p)``, clamped to [eps, 1 - eps] when eps is given."""
    p = input.clamp(eps, 1 - eps) if eps is not None else input
    return torch.log(p) - torch.log1p(-p)
