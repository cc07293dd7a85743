"""Replacements for loss functions: binary cross-entropy (with and without logits), CTC, Huber.

Kept together because they share torch's reduction conventions (``reduction=``
and the legacy ``size_average``/``reduce`` pair), spelled once here in
:func:`_reduce` and :func:`_legacy_reduction`.
"""
from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from dmlprof.replacements.ops.pointwise import logsigmoid


def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    from torch.nn import _reduction

    return _reduction.legacy_get_string(size_average, reduce)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """``F.binary_cross_entropy_with_logits`` with the log-sigmoid replaced (PyTorch's own formula)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    log_sig = logsigmoid(input)
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input - log_weight * log_sig
    else:
        loss = (1 - target) * input - log_sig
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


class _BinaryCrossEntropy(torch.autograd.Function):
    """Elementwise BCE on probabilities with PyTorch's exact forward clamp (log >= -100)
    and backward formula; ``binary_cross_entropy`` and its backward fall back on DirectML."""

    @staticmethod
    def forward(ctx, p, y):
        ctx.save_for_backward(p, y)
        return (y - 1) * torch.log1p(-p).clamp_min(-100) - y * torch.log(p).clamp_min(-100)

    @staticmethod
    def backward(ctx, grad):
        p, y = ctx.saved_tensors
        grad_p = grad_y = None
        if ctx.needs_input_grad[0]:
            grad_p = grad * (p - y) / ((1 - p) * p).clamp_min(1e-12)
        if ctx.needs_input_grad[1]:
            grad_y = grad * (torch.log1p(-p).clamp_min(-100) - torch.log(p).clamp_min(-100))
        return grad_p, grad_y


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``F.binary_cross_entropy`` whose forward and backward stay on the device."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
                         "is deprecated. Please ensure they have the same size.")
    loss = _BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


_CTC_NEG = -1e30  # a finite "log 0": -inf would turn the backward of logsumexp into NaN


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False):
    """``F.ctc_loss`` as the alpha recursion in log space from indexing/logsumexp/where.

    Autograd through the recursion gives the true gradient with respect to
    ``log_probs``; for log_softmax outputs (the documented use) the gradient
    reaching the logits equals PyTorch's.
    """
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.dim() == 1 else targets
    t_max, batch, _ = log_probs.shape
    device = log_probs.device
    input_lengths = _as_long(input_lengths, batch, device)
    target_lengths = _as_long(target_lengths, batch, device)
    if targets.dim() == 1:  # concatenated targets: pad them into (batch, longest)
        lengths = [int(v) for v in target_lengths.cpu().reshape(-1)]
        longest = max(lengths) if lengths else 0
        pieces = torch.split(targets, lengths)
        targets = torch.stack([F.pad(p, (0, longest - p.shape[0]), value=blank) for p in pieces], 0) \
            if batch else targets.reshape(0, 0)
    targets = targets.to(device).long()
    s_max = targets.shape[1]
    width = 2 * s_max + 1
    blanks = torch.full_like(targets, blank)
    extended = F.pad(torch.stack((blanks, targets), 2).reshape(batch, 2 * s_max), (0, 1), value=blank)
    # A label may follow the label two places back when it differs from it (and is no blank).
    skip = torch.zeros(batch, width, dtype=torch.bool, device=device)
    if width > 2:
        differs = (extended[:, 2:] != blank) & (extended[:, 2:] != extended[:, :-2])
        skip = torch.cat((skip[:, :2], differs), 1)
    # Each step's log-probability of each extended label, by indexing: the blank repeats in every row, and
    # gather's backward (scatter_add) keeps the last write instead of the sum there on DirectML.
    lp = log_probs[:, torch.arange(batch, device=device).unsqueeze(1), extended]
    positions = torch.arange(width, device=device).unsqueeze(0)
    neg = torch.full((batch, width), _CTC_NEG, dtype=log_probs.dtype, device=device)
    alpha = torch.where((positions < 2) & (positions < 2 * target_lengths.unsqueeze(1) + 1), lp[0], neg)
    neg_col = neg[:, :1]
    for t in range(1, t_max):
        one_back = torch.cat((neg_col, alpha[:, :-1]), 1)
        two_back = torch.where(skip, torch.cat((neg_col, neg_col, alpha[:, :-2]), 1), neg)
        step = torch.logsumexp(torch.stack((alpha, one_back, two_back), 0), 0) + lp[t]
        alpha = torch.where((t < input_lengths).unsqueeze(1), step, alpha)
    last = (2 * target_lengths).unsqueeze(1)
    end_blank = alpha.gather(1, last)
    end_label = torch.where(target_lengths.unsqueeze(1) > 0, alpha.gather(1, (last - 1).clamp_min(0)), neg[:, :1])
    loss = -torch.logsumexp(torch.cat((end_blank, end_label), 1), 1)
    impossible = loss > -_CTC_NEG / 2
    fill = torch.zeros_like(loss) if zero_infinity else torch.full_like(loss, math.inf)
    loss = torch.where(impossible, fill, loss)
    if reduction == "mean":
        return (loss / target_lengths.clamp_min(1).to(loss.dtype)).mean()
    if unbatched and reduction == "none":
        return loss.squeeze(0)
    return _reduce(loss, reduction)


def _as_long(values, batch: int, device):
    if isinstance(values, torch.Tensor):
        return values.reshape(-1).to(device=device, dtype=torch.long).expand(batch) if values.numel() == 1 \
            else values.to(device=device, dtype=torch.long)
    if isinstance(values, numbers.Number):
        values = [values] * batch
    return torch.tensor(list(values), dtype=torch.long).to(device)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0):
    """``F.huber_loss`` as ``delta * smooth_l1_loss(beta=delta)`` (huber_loss falls back; smooth_l1 is native)."""
    return delta * F.smooth_l1_loss(input, target, reduction=reduction, beta=delta)
