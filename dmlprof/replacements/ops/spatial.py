"""Replacements for image ops: sampling, resizing, patches, pooling and padding.

``grid_sample``, ``F.interpolate`` (linear, bilinear, 1-D nearest),
``unfold``/``fold``, ``adaptive_max_pool2d`` and constant ``F.pad``: each
either falls back on DirectML or, for bilinear resizing, gives wrong values
there; each is rebuilt from indexing, matmuls or convolutions whose kernels
and backwards are native.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch
import torch.nn.functional as F

from dmlprof.replacements.ops.indexing import eye


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
