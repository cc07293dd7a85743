"""What a kernel computes on where a device tensor has no values: its known constant, else values made up.

A tensor without values (beyond the budget, or made from the meta device)
still has to be handed to a CPU kernel now and then: where no Meta kernel
exists, or where an output's size depends on the data (``nonzero``). The
placeholder is the tensor's values where it has them, its constant where the
prediction knows one, else zeros; a filter's placeholders keep every element
(ones, masks all True), so code after it takes the path a working program's
data takes. The rules for making values up live here, apart from the kernels
that apply them (:mod:`dmlprof.predict.standin`), so that they read as one set.
"""
from __future__ import annotations

import torch

from dmlprof.predict.husks import strided, with_lazy_bits
from dmlprof.predict.values import ValueStore, constant_of, cpu_view, has_values

_CPU = torch.device("cpu")
#: CPU tensors up to this many elements copied to a device tensor without values are checked for being one value.
_CONSTANT_CHECK_MAX_ELEMENTS = 1 << 16
#: Set on a mask that tests floating-point values for an exact value (``x == 0``, ``isnan``): on a
#: working program's values such a test matches nothing, so a filter on it keeps nothing (ATen's
#: prod backward asks ``(input == 0).nonzero()`` and takes its no-zeros path on real data).
MATCHES_NOTHING = "_dmlprof_matches_nothing"


def value_of(source):
    """A constant a source holds: a number, a device tensor's known constant, or a small CPU tensor's one value."""
    if isinstance(source, (bool, int, float, complex)):
        return source
    if not isinstance(source, torch.Tensor):
        return None
    if source.device.type != "cpu":
        return constant_of(source)
    if source.numel() == 0 or source.numel() > _CONSTANT_CHECK_MAX_ELEMENTS or source.layout != torch.strided:
        return None
    with torch._C._DisableTorchDispatch():
        first = source.reshape(-1)[0]
        return first.item() if bool((source == first).all()) else None


def placeholder(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of the device tensor's values, else its constant, else zeros, on the CPU in its geometry
    (a kernel's output strides follow its inputs'); what a kernel writes into it is not kept."""
    if has_values(tensor):
        with torch._C._DisableTorchDispatch():
            view = cpu_view(tensor)
            return with_lazy_bits(torch.empty_strided(view.shape, view.stride(), dtype=view.dtype).copy_(view), view)
    with torch._C._DisableTorchDispatch():
        made = strided(tensor, _CPU)
        value = constant_of(tensor)
        return made.fill_(value) if value is not None and made.numel() else made


def _ones(tensor: torch.Tensor) -> torch.Tensor:
    """A placeholder of ones (True for bool): every element passes a filter, unless it is a mask
    that matches nothing (zeros then)."""
    made = placeholder(tensor)
    if getattr(tensor, MATCHES_NOTHING, False) or constant_of(tensor) is not None or has_values(tensor):
        return made
    with torch._C._DisableTorchDispatch():
        return made.fill_(1) if made.numel() else made


def _masks_all_true(tensor: torch.Tensor) -> torch.Tensor:
    """Boolean masks all True, other tensors zeros (an index of 0 is in range wherever one is)."""
    return _ones(tensor) if tensor.dtype == torch.bool else placeholder(tensor)


#: Ops whose output size depends on values, and the placeholders that keep every element. A working
#: program's filters keep elements (proposals survive, some labels are set): on zeros every filter
#: would return nothing, and code after it would take its rare empty-input path (torchvision's
#: batched_nms returns early on no boxes) instead of the one a real run takes.
SIZED_BY_DATA = {
    **dict.fromkeys(("aten::nonzero", "aten::nonzero.out", "aten::nonzero_numpy", "aten::argwhere"), _ones),
    **dict.fromkeys(("aten::masked_select", "aten::masked_select.out", "aten::index.Tensor",
                     "aten::index.Tensor_out"), _masks_all_true),
}
#: Of those, the ops whose values follow from that rule alone (the indices of the elements kept):
#: the prediction knows them (:func:`remember_values`).
FINDS_INDICES = frozenset({"aten::nonzero", "aten::nonzero.out", "aten::nonzero_numpy", "aten::argwhere"})


def sized_by_data(overload) -> bool:
    """Whether an op's output size depends on its inputs' values (so a placeholder's shape is made up)."""
    return any(getattr(torch.Tag, tag, None) in overload.tags for tag in ("dynamic_output_shape", "data_dependent_output"))


def remember_values(device_out, cpu_out, store: ValueStore) -> None:
    """The indices a filter found on placeholders (every element passes) as the device outputs' values."""
    if isinstance(device_out, (list, tuple)) and isinstance(cpu_out, (list, tuple)):
        for device_value, cpu_value in zip(device_out, cpu_out):
            remember_values(device_value, cpu_value, store)
    elif isinstance(device_out, torch.Tensor) and isinstance(cpu_out, torch.Tensor) and \
            device_out.shape == cpu_out.shape and device_out.stride() == cpu_out.stride() and \
            cpu_out.numel() <= _CONSTANT_CHECK_MAX_ELEMENTS:
        store.keep(device_out, cpu_out, budgeted=False)
