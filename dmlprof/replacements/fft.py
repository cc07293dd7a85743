"""FFTs of modest size as DFT matrix products (``_fft_*`` fall back on DirectML, and so do
``view_as_real``/``view_as_complex``, which the CPU fallback copies instead of viewing).

Complex values are carried as a trailing dimension of size 2 (real, imaginary),
never as a complex dtype: ``rfft(x)`` has the shape of
``torch.view_as_real(torch.fft.rfft(x))``. The work is one matmul per
transform (``mm.out``, native, and so is its backward), O(n^2) per row: fine
for the few hundred points of spectral losses, FNet mixing or Fourier
operators; use a real FFT for long signals.

``dim`` counts over the signal's own dimensions: for the complex-pair inputs of
``fft``/``ifft``/``irfft`` the trailing size-2 dimension is not counted.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

_CACHE: dict = {}
_CACHE_LIMIT = 64


def _dft(n_in: int, n_out: int, period: int, dtype, device):
    """(cos, sin) matrices of shape (n_in, n_out): angle 2*pi*(j*k mod period)/period."""
    key = (n_in, n_out, period, dtype, str(device))
    found = _CACHE.get(key)
    if found is None:
        j = torch.arange(n_in, dtype=torch.int64).unsqueeze(1)
        k = torch.arange(n_out, dtype=torch.int64).unsqueeze(0)
        angle = (j * k % period).to(torch.float64) * (2 * math.pi / period)
        found = (angle.cos().to(dtype).to(device), angle.sin().to(dtype).to(device))
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = found
    return found


def _scale(norm: Optional[str], n: int, inverse: bool) -> float:
    norm = norm or "backward"
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if norm == "forward":
        return 1.0 if inverse else 1.0 / n
    if norm == "backward":
        return 1.0 / n if inverse else 1.0
    raise ValueError(f'Invalid normalization mode: "{norm}"')


def _fit(x: torch.Tensor, n: int) -> torch.Tensor:
    """Trim or zero-pad the last dimension to n."""
    size = x.shape[-1]
    if size == n:
        return x
    if size > n:
        return x.narrow(-1, 0, n)
    return torch.nn.functional.pad(x, (0, n - size))


def rfft(input: torch.Tensor, n: Optional[int] = None, dim: int = -1, norm: Optional[str] = None) -> torch.Tensor:
    """Like ``torch.view_as_real(torch.fft.rfft(input, n, dim, norm))``."""
    x = input.movedim(dim, -1)
    n = x.shape[-1] if n is None else n
    x = _fit(x, n)
    cos, sin = _dft(n, n // 2 + 1, n, x.dtype, x.device)
    scale = _scale(norm, n, inverse=False)
    out = torch.stack((x @ cos, -(x @ sin)), -1)
    if scale != 1.0:
        out = out * scale
    return out.movedim(-2, dim % input.dim())


def irfft(input: torch.Tensor, n: Optional[int] = None, dim: int = -1, norm: Optional[str] = None) -> torch.Tensor:
    """Like ``torch.fft.irfft(torch.view_as_complex(input), n, dim, norm)`` (input: (..., 2))."""
    z = input.movedim(_pair_dim(input, dim), -2)
    half = z.shape[-2]
    n = 2 * (half - 1) if n is None else n
    keep = n // 2 + 1
    zr, zi = _fit(z[..., 0], keep), _fit(z[..., 1], keep)
    cos, sin = _dft(keep, n, n, z.dtype, z.device)
    # Hermitian symmetry: every bin except DC (and Nyquist for even n) stands for two.
    weight = torch.full((keep, 1), 2.0, dtype=z.dtype)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    weight = weight.to(z.device)
    out = zr @ (cos * weight) - zi @ (sin * weight)
    out = out * _scale(norm, n, inverse=True)
    return out.movedim(-1, _signal_dim(input, dim))


def fft(input: torch.Tensor, n: Optional[int] = None, dim: int = -1, norm: Optional[str] = None) -> torch.Tensor:
    """Like ``view_as_real(torch.fft.fft(view_as_complex(input), n, dim, norm))`` (input: (..., 2))."""
    return _complex_dft(input, n, dim, norm, inverse=False)


def ifft(input: torch.Tensor, n: Optional[int] = None, dim: int = -1, norm: Optional[str] = None) -> torch.Tensor:
    """Like ``view_as_real(torch.fft.ifft(view_as_complex(input), n, dim, norm))``."""
    return _complex_dft(input, n, dim, norm, inverse=True)


def fft2(input: torch.Tensor, dim=(-2, -1), norm: Optional[str] = None) -> torch.Tensor:
    """Like ``view_as_real(torch.fft.fft2(...))``: ``fft`` along each of two dims."""
    out = fft(input, dim=dim[0], norm=norm)
    return fft(out, dim=dim[1], norm=norm)


def _complex_dft(input, n, dim, norm, inverse: bool):
    if input.dim() < 2 or input.shape[-1] != 2:
        raise ValueError("expected a complex-as-pair tensor (..., 2); for real signals use rfft")
    z = input.movedim(_pair_dim(input, dim), -2)
    n = z.shape[-2] if n is None else n
    zr, zi = _fit(z[..., 0], n), _fit(z[..., 1], n)
    cos, sin = _dft(n, n, n, z.dtype, z.device)
    if inverse:
        real, imag = zr @ cos - zi @ sin, zi @ cos + zr @ sin
    else:
        real, imag = zr @ cos + zi @ sin, zi @ cos - zr @ sin
    out = torch.stack((real, imag), -1)
    scale = _scale(norm, n, inverse)
    if scale != 1.0:
        out = out * scale
    return out.movedim(-2, _pair_dim(input, dim))


def _signal_dim(pair_tensor: torch.Tensor, dim: int) -> int:
    """A dim of the signal (pair dimension not counted) as a non-negative index."""
    return dim % (pair_tensor.dim() - 1)


def _pair_dim(pair_tensor: torch.Tensor, dim: int) -> int:
    """Where that signal dim sits in the (..., 2) tensor."""
    return _signal_dim(pair_tensor, dim)
