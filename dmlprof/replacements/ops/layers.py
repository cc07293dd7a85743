"""Replacements for whole layers: group norm, weight norm, attention, LSTM and GRU.

Each is a layer whose forward or backward reaches an op that falls back on
DirectML (``native_group_norm_backward``, ``_weight_norm_interface``, the safe
softmax's ``isneginf``) or has no kernel there at all (the fused LSTM/GRU
cells, which the CPU lacks too, so the step fails). Where autograd of the
written-out forward would itself reach such an op, the layer is a
:class:`torch.autograd.Function` with its backward written from native ops.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F


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


def weight_norm(v, g, dim: int = 0):
    """``torch._weight_norm`` (nn.utils.weight_norm / parametrizations.weight_norm) as
    ``v * g / ||v||`` (``_weight_norm_interface`` and its backward fall back)."""
    if dim is None or dim == -1:
        return v * (g / torch.linalg.vector_norm(v))
    dim = dim % v.dim()
    others = [d for d in range(v.dim()) if d != dim]
    return v * (g / torch.linalg.vector_norm(v, 2, others, keepdim=True))


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
