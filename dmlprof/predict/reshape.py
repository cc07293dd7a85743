"""torch-directml's own ``reshape`` (its AutogradPrivateUse1 kernel), and the view arithmetic it needs.

torch-directml replaces torch's composite reshape with a kernel of its own,
which decides view or copy by its own rule and calls other ops than torch's
does; the calls a prediction records must be those. Pure geometry (sizes and
strides) apart from the two calls it makes, so kept apart from the stand-in's
kernels (:mod:`dmlprof.predict.standin`), which only route ``aten::reshape`` here.
"""
from __future__ import annotations

import torch


def directml_reshape(self: torch.Tensor, shape) -> torch.Tensor:
    """torch-directml's own reshape (its AutogradPrivateUse1 kernel), as measured on the real one: a shape
    the strides allow is an ``_reshape_alias`` (torch's composite makes a ``view``), any other a contiguous
    clone viewed with ``_unsafe_view``. Called above autograd, so autograd records both, as there; sizes
    and strides are worked out here without a call of their own (every call here would be recorded)."""
    sizes = _inferred_sizes(list(shape), self.numel())
    strides = _view_strides(list(self.shape), list(self.stride()), sizes)
    if strides is None:
        return torch.ops.aten._unsafe_view(self.clone(memory_format=torch.contiguous_format), sizes)
    return torch.ops.aten._reshape_alias(self, sizes, strides)


def _inferred_sizes(shape: list, numel: int) -> list:
    """``shape`` with its -1 filled in (view's own check raises on a shape that does not fit)."""
    if -1 not in shape:
        return shape
    known = 1
    for size in shape:
        known *= size if size != -1 else 1
    return [numel // known if size == -1 and known else size for size in shape]


def _contiguous_strides(sizes: list) -> list:
    strides, running = [1] * len(sizes), 1
    for index in range(len(sizes) - 1, -1, -1):
        strides[index] = running
        running *= max(sizes[index], 1)
    return strides


def _view_strides(old_sizes: list, old_strides: list, sizes: list):
    """The strides a view of this geometry with ``sizes`` takes, or None where no view can (ATen's
    computeStride, which view and torch-directml's reshape both follow)."""
    if not old_sizes:
        return [1] * len(sizes)
    if 0 in old_sizes:
        return list(old_strides) if old_sizes == sizes else _contiguous_strides(sizes)
    strides = [0] * len(sizes)
    view_d = len(sizes) - 1
    chunk_base_stride, tensor_numel, view_numel = old_strides[-1], 1, 1
    for tensor_d in range(len(old_sizes) - 1, -1, -1):
        tensor_numel *= old_sizes[tensor_d]
        if tensor_d == 0 or (old_sizes[tensor_d - 1] != 1
                             and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or sizes[view_d] == 1):
                strides[view_d] = view_numel * chunk_base_stride
                view_numel *= sizes[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride, tensor_numel, view_numel = old_strides[tensor_d - 1], 1, 1
    return strides if view_d == -1 else None
