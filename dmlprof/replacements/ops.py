"""Replacements for ops that fall back to the CPU on DirectML, built from ops it runs natively.

Every function here has the signature and semantics of the torch function it
replaces (for the cases it supports; the patch layer sends anything else to
the original). They are built only from ops with DirectML kernels (``mul.out``,
``add.out``, ``mm.out``, ``index.Tensor_out``, ``_index_put_impl_``, ``sum.IntList_out``,
``var.correction``, ``softplus.out``, ``upsample_nearest2d.out``, ...). Where the
autograd backward of such a composition would itself reach an op that falls
back, the replacement is a :class:`torch.autograd.Function` with its backward
written out from native ops too.

Each one is proven in ``tests/unit/test_replacements.py``: same values and
gradients as the original (gradcheck in float64 on the CPU) and zero fallback
calls for forward and backward on the emulated DirectML device.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch
import torch.nn.functional as F

def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


# --------------------------------------------------------------------------- lerp
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


# --------------------------------------------------------------------------- group norm
class _GroupNorm(torch.autograd.Function):
    """Forward with ``native_group_norm`` (native); backward written from mul/sub/mean/sum,
    because ``native_group_norm_backward`` falls back on DirectML."""

    @staticmethod
    def forward(ctx, x, weight, bias, groups: int, eps: float):
        n, c = x.shape[0], x.shape[1]
        hxw = x.numel() // (n * c) if n * c else 0
        y, mean, rstd = torch.native_group_norm(x, weight, bias, n, c, hxw, groups, eps)
        ctx.groups = groups
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, mean, rstd = ctx.saved_tensors
        return _group_norm_backward(grad_y, x, weight, mean, rstd, ctx.groups, ctx.needs_input_grad) + (None, None)


def _group_norm_backward(grad_y, x, weight, mean, rstd, groups, needs):
    # Per-channel sums first (two reductions over the activation), then the input gradient as
    # dx = dy * A + x * B + C with A per (n, c) and B, C per (n, group): PyTorch's own CPU kernel's
    # plan, which reads the activation about six times instead of a dozen.
    n, c = x.shape[0], x.shape[1]
    per_group = c // groups
    dy = grad_y.reshape(n, c, -1)
    xs = x.reshape(n, c, -1)
    m = per_group * xs.shape[2]
    dy_x = (dy * xs).sum(2).reshape(n, groups, per_group)
    dy_sum = dy.sum(2).reshape(n, groups, per_group)
    mean_g, rstd_g = mean.reshape(n, groups, 1), rstd.reshape(n, groups, 1)
    w = weight.reshape(1, groups, per_group) if weight is not None else None
    grad_x = grad_w = grad_b = None
    if needs[0]:
        s1 = (dy_sum if w is None else dy_sum * w).sum(2, keepdim=True)  # sum of dxhat per group
        s2 = (dy_x if w is None else dy_x * w).sum(2, keepdim=True)  # sum of dxhat * x per group
        b = -(rstd_g ** 3) * (s2 - mean_g * s1) / m
        c_term = -rstd_g * s1 / m - mean_g * b
        if w is None:
            dx = dy.reshape(n, groups, -1) * rstd_g
        else:
            dx = (dy * (rstd_g * w).reshape(n, c, 1)).reshape(n, groups, -1)
        grad_x = (dx + xs.reshape(n, groups, -1) * b + c_term).reshape(x.shape)
    if w is not None and needs[1]:
        grad_w = ((dy_x - dy_sum * mean_g) * rstd_g).reshape(n, c).sum(0)
    if needs[2]:
        grad_b = dy_sum.reshape(n, c).sum(0)
    return grad_x, grad_w, grad_b


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """``F.group_norm`` whose backward stays on the device."""
    if input.dim() < 2 or input.shape[1] % num_groups:
        return F.group_norm(input, num_groups, weight, bias, eps)
    return _GroupNorm.apply(input, weight, bias, int(num_groups), float(eps))


# --------------------------------------------------------------------------- grid sample
def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: Optional[bool] = None):
    """``F.grid_sample`` for 4-D input, bilinear, zeros or border padding, from indexing/mul/add.

    Autograd of this composition (index -> index_put with accumulate, floor, clamp) is native. Not
    gather: its backward is scatter_add, which keeps the last write instead of the sum where indices
    repeat on DirectML (measured on the real torch-directml), and neighbouring outputs share inputs.
    """
    if mode != "bilinear" or padding_mode not in ("zeros", "border") or input.dim() != 4:
        raise NotImplementedError("dmlprof grid_sample: 4-D bilinear with zeros/border padding only")
    align_corners = bool(align_corners)
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    gx, gy = grid[..., 0], grid[..., 1]
    if align_corners:
        ix, iy = (gx + 1) * (0.5 * (w - 1)), (gy + 1) * (0.5 * (h - 1))
    else:
        ix, iy = ((gx + 1) * w - 1) * 0.5, ((gy + 1) * h - 1) * 0.5
    if padding_mode == "border":
        ix, iy = ix.clamp(0, w - 1), iy.clamp(0, h - 1)
    x0, y0 = ix.floor(), iy.floor()
    wx1, wy1 = ix - x0, iy - y0
    wx0, wy0 = 1 - wx1, 1 - wy1
    flat = input.reshape(n, c, h * w)
    batch = torch.arange(n, device=input.device).view(n, 1, 1)
    channel = torch.arange(c, device=input.device).view(1, c, 1)
    out = None
    for xc, yc, wgt in ((x0, y0, wx0 * wy0), (x0 + 1, y0, wx1 * wy0), (x0, y0 + 1, wx0 * wy1), (x0 + 1, y0 + 1, wx1 * wy1)):
        valid = (xc >= 0) & (xc <= w - 1) & (yc >= 0) & (yc <= h - 1)
        index = (yc.clamp(0, h - 1) * w + xc.clamp(0, w - 1)).long().reshape(n, 1, ho * wo)
        value = flat[batch, channel, index].reshape(n, c, ho, wo)
        term = value * (wgt * valid.to(wgt.dtype)).unsqueeze(1)
        out = term if out is None else out + term
    return out


# --------------------------------------------------------------------------- embedding bag
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


# --------------------------------------------------------------------------- log-sigmoid and BCE
def logsigmoid(input):
    """``F.logsigmoid`` as ``-softplus(-x)`` (log_sigmoid_forward/backward fall back; softplus is native)."""
    return -F.softplus(-input)


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


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    from torch.nn import _reduction

    return _reduction.legacy_get_string(size_average, reduce)


# --------------------------------------------------------------------------- recurrent cells
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.lstm_cell`` (what ``_thnn_fused_lstm_cell`` computes) from linear/sigmoid/tanh."""
    h, c = hx
    gates = F.linear(input, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h_next = torch.sigmoid(o) * torch.tanh(c_next)
    return h_next, c_next


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.gru_cell`` (what ``_thnn_fused_gru_cell`` computes) from linear/sigmoid/tanh."""
    gi = F.linear(input, w_ih, b_ih)
    gh = F.linear(hx, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (hx - n)


def _lstm_step(projected_input, hx, w_hh, b_hh):
    """One LSTM step given the input's projection (x @ w_ih.T + b_ih), computed for all steps at once."""
    h, c = hx
    gates = projected_input + F.linear(h, w_hh, b_hh)
    hidden = h.shape[-1]
    sig = torch.sigmoid(gates)  # i, f, o (the g quarter is wasted, one kernel instead of three)
    i, f, o = sig[..., :hidden], sig[..., hidden:2 * hidden], sig[..., 3 * hidden:]
    g = torch.tanh(gates[..., 2 * hidden:3 * hidden])
    c_next = torch.addcmul(f * c, i, g)
    return o * torch.tanh(c_next), c_next


def _gru_step(projected_input, hx, w_hh, b_hh):
    """One GRU step given the input's projection (x @ w_ih.T + b_ih), computed for all steps at once."""
    gh = F.linear(hx, w_hh, b_hh)
    hidden = hx.shape[-1]
    rz = torch.sigmoid(projected_input[..., :2 * hidden] + gh[..., :2 * hidden])
    r, z = rz[..., :hidden], rz[..., hidden:]
    n = torch.tanh(projected_input[..., 2 * hidden:] + r * gh[..., 2 * hidden:])
    return n + z * (hx - n)


def rnn_stack(cell: str, input, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
              bidirectional: bool, batch_first: bool):
    """``torch.lstm`` / ``torch.gru`` (unpacked input; the arguments ``nn.LSTM``/``nn.GRU`` pass)
    as a loop over time of the replacement cells. ``hx`` is ``(h0, c0)`` for LSTM, ``h0`` for GRU.

    The input projection of each layer is one matmul over the whole sequence; each time step then
    costs one small matmul and a few elementwise kernels."""
    per = 4 if has_biases else 2
    directions = 2 if bidirectional else 1
    if len(params) != per * num_layers * directions:
        raise NotImplementedError("dmlprof rnn: projections (proj_size) are not supported")
    step = _lstm_step if cell == "lstm" else _gru_step
    x = input.transpose(0, 1) if batch_first else input
    h0 = hx[0] if cell == "lstm" else hx
    c0 = hx[1] if cell == "lstm" else None
    h_out, c_out = [], []
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            k = (layer * directions + direction) * per
            w_ih, w_hh = params[k], params[k + 1]
            b_ih, b_hh = (params[k + 2], params[k + 3]) if has_biases else (None, None)
            projected = F.linear(x, w_ih, b_ih)  # (time, batch, gates * hidden)
            idx = layer * directions + direction
            state = (h0[idx], c0[idx]) if cell == "lstm" else h0[idx]
            steps = range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])
            seq = [None] * x.shape[0]
            for t in steps:
                state = step(projected[t], state, w_hh, b_hh)
                seq[t] = state[0] if cell == "lstm" else state
            outputs.append(torch.stack(seq, 0))
            h_out.append(state[0] if cell == "lstm" else state)
            if cell == "lstm":
                c_out.append(state[1])
        x = outputs[0] if directions == 1 else torch.cat(outputs, -1)
        if dropout and train and layer < num_layers - 1:
            x = F.dropout(x, dropout, training=True)
    output = x.transpose(0, 1) if batch_first else x
    h_n = torch.stack(h_out, 0)
    if cell == "lstm":
        return output, h_n, torch.stack(c_out, 0)
    return output, h_n


# --------------------------------------------------------------------------- CTC loss
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


# --------------------------------------------------------------------------- small ops
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


def eye(n: int, m: Optional[int] = None, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    """``torch.eye`` from arange and eq (eye.m_out falls back)."""
    m = n if m is None else m
    rows = torch.arange(n, device=device).unsqueeze(1)
    cols = torch.arange(m, device=device).unsqueeze(0)
    out = (rows == cols).to(dtype or torch.get_default_dtype())
    return out.requires_grad_(requires_grad) if requires_grad else out


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


def count_nonzero(input, dim=None):
    """``torch.count_nonzero`` as ``(x != 0).sum(dim)`` (count_nonzero.dim_IntList falls back)."""
    nonzero = input != 0
    if dim is None:
        return nonzero.sum()
    return nonzero.sum(dim)


def _interpolate_as_2d(input, size, scale_factor, **options):
    """A 1-D ``F.interpolate`` on 3-D input, run as the 2-D one on a height of 1 (whose kernels are native)."""
    size2 = None if size is None else (1, size if isinstance(size, int) else int(size[0]))
    scale2 = None
    if scale_factor is not None:
        scale = scale_factor if isinstance(scale_factor, numbers.Number) else scale_factor[0]
        scale2 = (1.0, float(scale))
    return F.interpolate(input.unsqueeze(2), size=size2, scale_factor=scale2, **options).squeeze(2)


def interpolate_nearest1d(input, size=None, scale_factor=None, recompute_scale_factor=None):
    """``F.interpolate(x, mode='nearest')`` on 3-D input through upsample_nearest2d (native, with its backward)."""
    return _interpolate_as_2d(input, size, scale_factor, mode="nearest", recompute_scale_factor=recompute_scale_factor)


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


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0):
    """``F.huber_loss`` as ``delta * smooth_l1_loss(beta=delta)`` (huber_loss falls back; smooth_l1 is native)."""
    return delta * F.smooth_l1_loss(input, target, reduction=reduction, beta=delta)


# --------------------------------------------------------------------------- attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: Optional[float] = None):
    """``F.scaled_dot_product_attention`` written out (matmul, masked_fill, softmax, matmul).

    On torch >= 2.5 the math path's safe softmax calls ``isneginf``, which falls
    back on DirectML; this keeps the same result (rows with every key masked give
    zeros, as torch's safe softmax does) from native ops.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    masked = False
    if is_causal:
        keep = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(keep.logical_not(), -math.inf)
        masked = True
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
        masked = True
    weights = torch.softmax(scores, -1)
    if masked:  # a row with every key masked: zeros, not NaN
        weights = weights.masked_fill(scores.amax(-1, keepdim=True) == -math.inf, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p, training=True)
    return weights @ value


# --------------------------------------------------------------------------- more activations, layers and small ops
def glu(input, dim: int = -1):
    """``F.glu`` as ``a * sigmoid(b)`` (glu.out and glu_backward fall back)."""
    a, b = input.chunk(2, dim)
    return a * torch.sigmoid(b)


def mish(input, inplace: bool = False):
    """``F.mish`` as ``x * tanh(softplus(x))`` (mish.out falls back)."""
    out = input * torch.tanh(F.softplus(input))
    return input.copy_(out) if inplace else out


def weight_norm(v, g, dim: int = 0):
    """``torch._weight_norm`` (nn.utils.weight_norm / parametrizations.weight_norm) as
    ``v * g / ||v||`` (``_weight_norm_interface`` and its backward fall back)."""
    if dim is None or dim == -1:
        return v * (g / torch.linalg.vector_norm(v))
    dim = dim % v.dim()
    others = [d for d in range(v.dim()) if d != dim]
    return v * (g / torch.linalg.vector_norm(v, 2, others, keepdim=True))


_UNFOLD_CACHE: dict = {}


def _patch_kernel(channels: int, kh: int, kw: int, dtype, device):
    """Grouped-convolution weight that copies each of the kh*kw window positions to its own channel."""
    key = (channels, kh, kw, dtype, str(device))
    weight = _UNFOLD_CACHE.get(key)
    if weight is None:
        weight = eye(kh * kw, dtype=dtype, device=device).reshape(kh * kw, 1, kh, kw).repeat(channels, 1, 1, 1)
        if len(_UNFOLD_CACHE) > 32:
            _UNFOLD_CACHE.clear()
        _UNFOLD_CACHE[key] = weight
    return weight


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """``F.unfold`` (im2col, falls back) as a grouped convolution with one-hot kernels (native both ways)."""
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    kh, kw = _pair(kernel_size)
    n, c = x.shape[:2]
    patches = F.conv2d(x, _patch_kernel(c, kh, kw, x.dtype, x.device), stride=_pair(stride), padding=_pair(padding),
                       dilation=_pair(dilation), groups=c)
    out = patches.reshape(n, c * kh * kw, -1)
    return out if batched else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """``F.fold`` (col2im, falls back) as the transposed grouped convolution of :func:`unfold`."""
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    (h, w), (kh, kw) = _pair(output_size), _pair(kernel_size)
    (dh, dw), (ph, pw), (sh, sw) = _pair(dilation), _pair(padding), _pair(stride)
    rows = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    cols = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    n, ckk, blocks = x.shape
    if blocks != rows * cols or ckk % (kh * kw):
        raise NotImplementedError("fold: input does not match output_size/kernel_size")
    c = ckk // (kh * kw)
    extra_h = h - ((rows - 1) * sh - 2 * ph + dh * (kh - 1) + 1)
    extra_w = w - ((cols - 1) * sw - 2 * pw + dw * (kw - 1) + 1)
    if not (0 <= extra_h < max(sh, dh) and 0 <= extra_w < max(sw, dw)):
        raise NotImplementedError("fold: output size not reachable by a transposed convolution")
    out = F.conv_transpose2d(x.reshape(n, ckk, rows, cols), _patch_kernel(c, kh, kw, x.dtype, x.device),
                             stride=(sh, sw), padding=(ph, pw), output_padding=(extra_h, extra_w), groups=c,
                             dilation=(dh, dw))
    return out if batched else out.squeeze(0)


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """``F.adaptive_max_pool2d`` when the input divides evenly into the output (then it is a plain
    max pool, whose kernel and backward are native)."""
    oh, ow = _pair(output_size)
    h, w = input.shape[-2:]
    oh, ow = oh or h, ow or w
    if h % oh or w % ow:
        raise NotImplementedError("adaptive_max_pool2d: input size not a multiple of the output size")
    kernel = (h // oh, w // ow)
    return F.max_pool2d(input, kernel, kernel, return_indices=return_indices)


def _linear_weights(in_size: int, out_size: int, scale: Optional[float], align_corners: bool, dtype, device):
    """The (out, in) matrix of linear interpolation along one axis, as ATen samples it: output i reads
    source position (i + 0.5) * scale - 0.5 clamped at 0 (align_corners: i * (in - 1) / (out - 1))."""
    i = torch.arange(out_size, dtype=torch.float64)
    if align_corners:
        source = i * ((in_size - 1) / (out_size - 1)) if out_size > 1 else torch.zeros_like(i)
    else:
        step = scale if scale is not None and scale > 0 else in_size / out_size
        source = ((i + 0.5) * step - 0.5).clamp(min=0)
    low = source.floor().long().clamp(max=in_size - 1)
    high = (low + 1).clamp(max=in_size - 1)
    weight_high = source - low
    weights = torch.zeros(out_size, in_size, dtype=torch.float64)
    rows = torch.arange(out_size)
    weights.index_put_((rows, low), 1 - weight_high, accumulate=True)
    weights.index_put_((rows, high), weight_high, accumulate=True)
    return weights.to(dtype).to(device)


def _output_sizes(spatial, size, scale_factor, recompute_scale_factor):
    """Output sizes and the scales ATen samples with (1/scale_factor unless the scale is recomputed)."""
    count = len(spatial)
    if size is not None:
        sizes = [int(size)] * count if isinstance(size, numbers.Number) else [int(s) for s in size]
        return sizes, [None] * count
    factors = [float(scale_factor)] * count if isinstance(scale_factor, numbers.Number) else [float(f) for f in scale_factor]
    sizes = [int(math.floor(n * f)) for n, f in zip(spatial, factors)]
    return sizes, [None if recompute_scale_factor else 1.0 / f for f in factors]


def interpolate_bilinear(input, size=None, scale_factor=None, align_corners=None, recompute_scale_factor=None):
    """``F.interpolate(x, mode='bilinear'|'linear')`` as matmuls with interpolation matrices: one per
    resized axis, ATen's sampling exactly (upsample_bilinear2d gives wrong values on DirectML,
    microsoft/DirectML#482; mm and its backward are native and right)."""
    spatial = list(input.shape[2:])
    if len(spatial) not in (1, 2):
        raise NotImplementedError("interpolate_bilinear: 3-D (linear) or 4-D (bilinear) input only")
    sizes, scales = _output_sizes(spatial, size, scale_factor, recompute_scale_factor)
    out = input
    for axis, (n_in, n_out, scale) in enumerate(zip(spatial, sizes, scales)):
        weights = _linear_weights(n_in, n_out, scale, bool(align_corners), input.dtype, input.device)
        dim = 2 + axis
        out = torch.matmul(out.movedim(dim, -1), weights.t()).movedim(-1, dim)
    return out


def interpolate_linear1d(input, size=None, scale_factor=None, align_corners=None, recompute_scale_factor=None):
    """``F.interpolate(x, mode='linear')`` on 3-D input (upsample_linear1d falls back) as one matmul
    (not through upsample_bilinear2d, whose values are wrong on DirectML)."""
    return interpolate_bilinear(input, size, scale_factor, align_corners, recompute_scale_factor)


def pad_constant(input, pad, value: float = 0.0):
    """``F.pad(x, pad, mode='constant', value=...)`` with non-negative pads, as concatenation with constant
    blocks: its backward is slicing. F.pad's own backward is constant_pad_nd with negative pads (cropping),
    which torch-directml refuses ("ensure_in_bounds": a view beyond the storage, measured), so every padded
    model (nn.ZeroPad2d, ConstantPad2d, F.pad) fails to train on DirectML without it."""
    if len(pad) % 2 or len(pad) // 2 > input.dim() or any(p < 0 for p in pad):
        raise NotImplementedError("pad_constant: non-negative pads, two per padded dimension")
    out = input
    for axis in range(len(pad) // 2):  # pad's pairs run from the last dimension backwards
        before, after, dim = pad[2 * axis], pad[2 * axis + 1], input.dim() - 1 - axis
        pieces = ([_constant_block(out, dim, before, value)] if before else []) + [out] + \
            ([_constant_block(out, dim, after, value)] if after else [])
        out = torch.cat(pieces, dim) if len(pieces) > 1 else out
    return out


def _constant_block(like, dim: int, size: int, value: float):
    shape = list(like.shape)
    shape[dim] = size
    return like.new_full(shape, value)


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


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """``torch.bucketize`` (falls back) by counting boundaries below each value (memory: values x boundaries)."""
    if boundaries.dim() != 1:
        raise NotImplementedError("bucketize: 1-D boundaries only")
    below = (input.unsqueeze(-1) >= boundaries) if right else (input.unsqueeze(-1) > boundaries)
    return below.sum(-1).to(torch.int32 if out_int32 else torch.int64)


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
