"""How close a device result must be to the CPU's: dtype-aware tolerances and the comparison.

Pure functions over CPU tensors (docs/verify.md explains the numbers). An
element passes when

    |device - cpu| <= r * (atol + rtol * (|cpu| + (max|cpu| if r > 1 else 0)))

where ``(rtol, atol)`` come from the dtype and ``r = sqrt(K)`` grows with the
number of terms ``K`` each output element sums (estimated as the largest
input's element count over the output's). Reductions add up rounding error
term by term, in an order the device chooses (hence the scale), and some
output elements cancel to near zero while their error stays the size of the
others' (hence the ``max|cpu|`` term, for reductions only). Integers and booleans must match exactly; NaN matches NaN,
infinities must match exactly.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

#: (rtol, atol) per floating dtype; complex dtypes use their real part's.
TOLERANCES = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (3e-2, 1e-2),
}
_FLOAT8 = (1.25e-1, 1e-1)
_COMPLEX_PART = {torch.complex128: torch.float64, torch.complex64: torch.float32}
if hasattr(torch, "complex32"):
    _COMPLEX_PART[torch.complex32] = torch.float16


def tolerance_for(dtype: torch.dtype) -> Optional[tuple]:
    """``(rtol, atol)`` for a floating or complex dtype; ``None`` means exact (integers, bool)."""
    dtype = _COMPLEX_PART.get(dtype, dtype)
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:  # float8 variants and anything newer
        return _FLOAT8
    return None


def reduction_scale(input_numel: int, output_numel: int) -> float:
    """``sqrt(K)``, K the terms per output element (>= 1): how far rounding error may grow."""
    if output_numel <= 0 or input_numel <= output_numel:
        return 1.0
    return math.sqrt(input_numel / output_numel)


def compare(device: torch.Tensor, cpu: torch.Tensor, scale: float = 1.0) -> Optional[dict]:
    """``None`` when ``device`` (already copied to the host) matches ``cpu``; else what differs.

    The result has ``reason``, ``max_abs_error``, ``max_rel_error`` (error over
    ``max(|cpu|, atol)`` element-wise), ``mismatched`` and ``numel``.
    """
    if tuple(device.shape) != tuple(cpu.shape):
        return _differs(f"shape {tuple(device.shape)} on the device, {tuple(cpu.shape)} on the CPU", cpu)
    if device.dtype != cpu.dtype:
        return _differs(f"dtype {_dtype(device.dtype)} on the device, {_dtype(cpu.dtype)} on the CPU", cpu)
    if cpu.numel() == 0 or torch.equal(device, cpu):
        return None
    if device.is_complex():
        device, cpu = torch.view_as_real(device.resolve_conj()), torch.view_as_real(cpu.resolve_conj())
    tolerance = tolerance_for(device.dtype)
    if tolerance is None:
        different = device != cpu
        mismatched = int(different.sum())
        if mismatched == 0:
            return None
        wide = torch.int64 if device.dtype != torch.uint64 else torch.float64
        error = (device.to(wide) - cpu.to(wide)).abs().max().item() if device.dtype != torch.bool else 1
        return {"reason": "values differ (exact match required for this dtype)", "max_abs_error": float(error),
                "max_rel_error": None, "mismatched": mismatched, "numel": int(cpu.numel()),
                "rtol": 0.0, "atol": 0.0}
    rtol, atol = tolerance
    work = torch.float64 if device.dtype == torch.float64 else torch.float32
    d, c = device.to(work), cpu.to(work)
    both_nan = torch.isnan(d) & torch.isnan(c)
    one_nan = torch.isnan(d) ^ torch.isnan(c)
    same = (d == c) | both_nan  # equal infinities too
    error = torch.where(same, torch.zeros_like(d), (d - c).abs())
    error = torch.where(one_nan, torch.full_like(d, math.inf), error)
    error = torch.nan_to_num(error, nan=math.inf)  # inf - inf, an infinity against a finite value
    magnitude = torch.nan_to_num(c.abs(), nan=0.0, posinf=0.0)
    spread = float(magnitude.max()) if scale > 1 and magnitude.numel() else 0.0
    allowed = scale * (atol + rtol * (magnitude + spread))
    bad = error > allowed
    mismatched = int(bad.sum())
    if mismatched == 0:
        return None
    relative = error / torch.clamp(magnitude, min=atol)
    return {"reason": "values differ beyond tolerance", "max_abs_error": float(error.max()),
            "max_rel_error": float(relative.max()), "mismatched": mismatched, "numel": int(cpu.numel()),
            "rtol": rtol * scale, "atol": atol * scale}


def compare_numbers(device, cpu, dtype: Optional[torch.dtype]) -> Optional[dict]:
    """Python scalars a call returned (``.item()``, ``equal``) compared like one-element tensors."""
    if isinstance(device, bool) or isinstance(cpu, bool) or dtype is None:
        if device == cpu:
            return None
        return {"reason": f"{device!r} on the device, {cpu!r} on the CPU", "max_abs_error": None,
                "max_rel_error": None, "mismatched": 1, "numel": 1, "rtol": 0.0, "atol": 0.0}
    work = dtype if (dtype.is_floating_point or dtype.is_complex) else torch.float64
    try:
        return compare(torch.tensor([device], dtype=work), torch.tensor([cpu], dtype=work))
    except (TypeError, RuntimeError):
        return None if device == cpu else compare_numbers(str(device), str(cpu), None)


def _differs(reason: str, cpu: torch.Tensor) -> dict:
    return {"reason": reason, "max_abs_error": None, "max_rel_error": None, "mismatched": int(cpu.numel()),
            "numel": int(cpu.numel()), "rtol": 0.0, "atol": 0.0}


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")
