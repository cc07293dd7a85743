"""The storage offset each view should have, where the device's views do not say it (real torch-directml).

Real torch-directml 0.2.5 reports ``storage_offset()`` 0 for every view (``x[:, 4:]``, ``x[1]``, ``as_strided``
with an offset: realdml), and its tensors have no ``data_ptr()`` nor readable storage, so a view past its base's
start cannot be told from the view itself. The recorder sees the call that made it, below autograd: this module
keeps, for each view made on such a device, the offset the CPU would give it, by running the same view call on a
meta twin of its input (the input's sizes, strides and its own kept offset; nothing allocated, every view op's
arithmetic is PyTorch's own). Only views past their storage's start get an entry, held weakly (a dead view's
entry goes with it); calls that make no view cost one dict lookup.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch.utils.weak import WeakIdKeyDictionary

#: view ops whose output starts where their input does: worked out only for an input with a kept offset
_KEEP_OFFSET = frozenset({
    "aten::view", "aten::_reshape_alias", "aten::t", "aten::transpose.int", "aten::permute", "aten::expand",
    "aten::unsqueeze", "aten::squeeze", "aten::squeeze.dim", "aten::squeeze.dims", "aten::alias", "aten::detach",
    "aten::unfold", "aten::_unsafe_view", "aten::view_as", "aten::numpy_T", "aten::mT", "aten::mH",
})
_NOT_A_VIEW, _KEEPS, _MAY_SHIFT = 0, 1, 2


def _kind(func, name: str) -> int:
    returns = func._schema.returns
    alias = returns[0].alias_info if returns else None
    if alias is None or alias.is_write:  # makes a new tensor, or writes in place (returns its input)
        return _NOT_A_VIEW
    return _KEEPS if name in _KEEP_OFFSET else _MAY_SHIFT


def _meta_twin(tensor: torch.Tensor, offset: int) -> torch.Tensor:
    """A meta tensor of ``tensor``'s sizes and strides at ``offset`` in its storage (no memory)."""
    sizes, strides = tuple(tensor.shape), tuple(tensor.stride())
    span = 0 if 0 in sizes else 1 + sum((n - 1) * abs(s) for n, s in zip(sizes, strides))
    return torch.empty(offset + span, dtype=tensor.dtype, device="meta").as_strided(sizes, strides, offset)


class IntendedOffsets:
    """The offsets views should have (``offset_of``), kept from the calls that made them (``note``)."""

    def __init__(self, op_name: Callable, reported: Callable = torch.Tensor.storage_offset):
        self._op_name = op_name
        self._reported = reported  # what a tensor's own offset says (a test stands in for the device's 0)
        self._offsets = WeakIdKeyDictionary()  # view -> its offset in its storage, where not 0
        self._kinds: dict = {}  # overload -> _NOT_A_VIEW, _KEEPS or _MAY_SHIFT

    def offset_of(self, tensor: torch.Tensor) -> int:
        """The offset ``tensor`` should report: the kept one, else its own."""
        kept = self._offsets.get(tensor)
        return kept if kept is not None else self._reported(tensor)

    def note(self, func, args, kwargs, out) -> None:
        """After a call ran: where it made a view, keep the view's offset (where not 0)."""
        kind = self._kinds.get(func)
        if kind is None:
            kind = self._kinds[func] = _kind(func, self._op_name(func))
        if kind == _NOT_A_VIEW or not args or not isinstance(args[0], torch.Tensor):
            return
        source = args[0]
        kept = self._offsets.get(source)
        if kind == _KEEPS and kept is None:
            return
        try:
            twin_out = func(_meta_twin(source, kept if kept is not None else self._reported(source)),
                            *args[1:], **(kwargs or {}))
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            return  # an op meta cannot run: its view is left as the device says
        views = out if isinstance(out, (list, tuple)) else (out,)
        twins = twin_out if isinstance(twin_out, (list, tuple)) else (twin_out,)
        for view, twin in zip(views, twins):
            if isinstance(view, torch.Tensor) and isinstance(twin, torch.Tensor) and twin.storage_offset():
                self._offsets[view] = twin.storage_offset()
