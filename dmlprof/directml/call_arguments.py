"""The scalar arguments (and the few values) of a call that the wrong-result classes are keyed by.

The op frame keeps a call's dtypes and input shapes; some classes of wrong results also need an argument
(max pooling's ``ceil_mode``) or a value (whether an ``nll_loss`` target holds ``ignore_index``). For the
few ops with such a class, the recorder keeps them as JSON in the frame's ``arguments`` column
(:func:`arguments_judge`), and :mod:`dmlprof.tables.wrong_classes` reads them back. The in-place overloads
(every one whose schema writes its ``self``) keep something only inside their class (a write into a view past
its base's start whose gradient a backward takes). What an overload is judged for is worked out once, from its name
and schema (:class:`Judges`); everything else records nothing here (a dict lookup).
"""
from __future__ import annotations

import json
from typing import Callable, Optional

import torch

from dmlprof.tables.wrong_classes import RRELU_OPS, SCATTER_ACCUMULATING_OPS, in_place_by_name

_enable_record_function = getattr(torch._C._autograd, "_enable_record_function", None)


def read_device_values(tensor) -> Optional[torch.Tensor]:
    """A tensor's values on the CPU, read without changing the run (for a device tensor with storage: a copy
    after the queue, a sync and nothing more); None where they cannot be read. A backend whose tensors have no
    values (the prediction's stand-in) gives its own reader (``DirectMLSemantics.read_values``)."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta":
        return None
    if tensor.device.type == "cpu":
        return tensor
    try:
        return tensor.detach().to("cpu")
    except RuntimeError:
        return None


def _classes(scores) -> int:
    """The number of classes of nll_loss's input ((N, C, ...) or (C,)); 0 when unknown."""
    shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else ()
    return shape[1] if len(shape) >= 2 else (shape[0] if len(shape) == 1 else 0)


def _nll_loss(target_at: int, reduction_at: int, ignore_at: int) -> Callable:
    def arguments(args, kwargs, _read) -> dict:
        ignore = args[ignore_at] if len(args) > ignore_at else kwargs.get("ignore_index", -100)
        found = {"ignore_index": int(ignore), "reduction": int(args[reduction_at]) if len(args) > reduction_at
                 else int(kwargs.get("reduction", 1))}
        # the values are read only where the class can hold: more classes than -ignore_index (a read is a sync)
        if int(ignore) < 0 and _classes(args[target_at - 1] if len(args) >= target_at else None) > -int(ignore):
            target = _read(args[target_at] if len(args) > target_at else kwargs.get("target"))
            if target is not None and not target.is_floating_point():
                found["targets_ignored"] = bool((target == int(ignore)).any())
        if target_at == 2 and found["reduction"] == 0:  # backward of reduction="none": are the rows' gradients alike?
            grad = _read(args[0] if args else kwargs.get("grad_output"))
            if grad is not None and grad.numel():
                flat = grad.reshape(-1)
                found["grad_output_varies"] = bool((flat != flat[0]).any())
        return found
    return arguments


def _max_pool(ceil_at: int) -> Callable:
    def arguments(args, kwargs, _read) -> dict:
        return {"ceil_mode": bool(args[ceil_at] if len(args) > ceil_at else kwargs.get("ceil_mode", False))}
    return arguments


def _scaled_product(args, kwargs, _read) -> dict:
    """addmm/baddbmm's beta and alpha (keyword-only): whether either is fractional."""
    scalars = [kwargs.get("beta", 1), kwargs.get("alpha", 1)]
    return {"fractional_scale": any(isinstance(v, float) and not float(v).is_integer() for v in scalars)}


def _copy_between_devices(args, kwargs, _read) -> dict:
    """_to_copy's source device and dtype, destination device and dtype (None: not given, the source's kept)."""
    source = args[0] if args else kwargs.get("self")
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    tensor = isinstance(source, torch.Tensor)
    return {"from_device": source.device.type if tensor else None, "from_dtype": _name(source.dtype) if tensor else None,
            "to_device": torch.device(device).type if device is not None else None,
            "dtype": _name(dtype) if isinstance(dtype, torch.dtype) else None}


def _reported_offset(tensor: torch.Tensor) -> int:
    return tensor.storage_offset()


def _written_view_under_autograd(offset_of: Callable = _reported_offset) -> Callable:
    """An in-place write (``h[:, 4:] = 0`` is ``slice`` then ``fill_``; ``nn.ReLU6(inplace=True)(h[:, 4:])``
    ``hardtanh_``) into a view that starts past its base's start, while autograd records it: grad mode on and the
    view or a written value requiring grad. Real torch-directml reports ``storage_offset()`` 0 for every view, and
    autograd's CopySlices rebuilds the written slice from that offset in the backward, so the slice's gradient
    lands at the base's start (realdml). The written tensor is ``self`` (a list of them for ``_foreach_*_``).
    ``offset_of(tensor)``: the offset a view should have (its own where the device's views keep the CPU's offsets;
    on real torch-directml the one :class:`~dmlprof.directml.view_offsets.IntendedOffsets` kept). Empty (nothing
    kept) outside the class.

    With grad mode off, a view that itself requires grad is kept without ``autograd_records``: an
    ``autograd.Function``'s forward runs so, and its ``ctx.mark_dirty`` gives the view's base a CopySlices when
    ``apply`` returns (re-probe 15, case 8); the recorder tells that from a ``no_grad`` write
    (:mod:`dmlprof.record.written_views`), and only a backward through the CopySlices makes the finding."""
    def past_its_start(written) -> int:
        if not isinstance(written, torch.Tensor) or not written._is_view():
            return 0
        base = written._base
        return offset_of(written) - offset_of(base) if base is not None else 0

    def arguments(args, kwargs, _read) -> dict:
        written = args[0] if args else kwargs.get("self")
        if not torch.is_grad_enabled():  # an optimizer's in-place updates run so: their params are no views
            if isinstance(written, torch.Tensor) and written.requires_grad:
                past_start = past_its_start(written)
                return {"view_offset": past_start} if past_start else {}
            return {}
        if isinstance(written, (list, tuple)):
            past_start = next(filter(None, map(past_its_start, written)), 0)
        else:
            past_start = past_its_start(written)
        if not past_start or not any(map(_requires_grad, (*args, *kwargs.values()))):
            return {}
        return {"view_offset": past_start, "autograd_records": True}
    return arguments


def _requires_grad(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, torch.Tensor) and v.requires_grad for v in value)
    return isinstance(value, torch.Tensor) and value.requires_grad


def writes_its_self(func) -> bool:
    """Whether an overload writes its ``self`` in place (``Tensor(a!) self``, a name ending in ``_``): autograd
    then rebuilds ``self``'s history (CopySlices where it is a view). Metadata-only in-place views (``unsqueeze_``,
    ``t_``, tagged ``inplace_view``) write no values and get none; other written arguments (BatchNorm's running
    stats) are not rebuilt either, and out= overloads refuse autograd."""
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.arguments or not in_place_by_name(schema.name):
        return False
    first = schema.arguments[0]
    return first.name == "self" and first.alias_info is not None and first.alias_info.is_write and \
        torch.Tag.inplace_view not in getattr(func, "tags", ())


#: index elements beyond which a scatter's index is not read (a sort of them would cost the run seconds)
SCATTER_INDEX_MAX_READ = 1 << 24


def _targets_repeat(index: torch.Tensor, dim: int) -> bool:
    """Whether two elements of a scatter's ``index`` write the same element of its output: equal values in one
    line of ``index`` along ``dim`` (its other coordinates are the output's). Exact, and bounded: lines equal along
    another dim (message passing's index materialised by ``repeat``) are judged once, and a line's values are
    counted, not sorted, where their range is no wider than the index (re-probe 13, case 9: a sort of a 1M x 16
    index cost 1.44 s per recorded call)."""
    if index.dim() == 0 or index.numel() < 2:
        return False
    dim = dim % index.dim()
    for other in range(index.dim()):
        if other == dim or index.shape[other] < 2:
            continue
        first = index.narrow(other, 0, 1)
        if bool(index.narrow(dim, 0, 1).eq(first.narrow(dim, 0, 1)).all()) and bool(index.eq(first).all()):
            index = first  # (lines that differ mostly differ at their start: the whole compare is skipped)
    length = index.shape[dim]
    if length < 2:
        return False
    low, high = (int(bound) for bound in index.aminmax())
    if low >= 0 and (high + 1) * (index.numel() // length) <= 2 * index.numel():  # int32 counts: the index's bytes
        shape = list(index.shape)
        shape[dim] = high + 1
        ones = torch.ones((), dtype=torch.int32).expand(index.shape)
        counts = torch.zeros(shape, dtype=torch.int32).scatter_add_(dim, index, ones)
        return bool((counts > 1).any())
    ordered = index.sort(dim=dim).values  # values spread far wider than the lines: a count would not fit
    return bool((ordered.narrow(dim, 1, length - 1) == ordered.narrow(dim, 0, length - 1)).any())


def _scatter_accumulating(args, kwargs, read) -> dict:
    """scatter_add's (and scatter's with ``reduce=``) index: whether targets repeat (a read of the index, a sync),
    or that its values could not be read."""
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    index = args[2] if len(args) > 2 else kwargs.get("index")
    if not isinstance(dim, int) or not isinstance(index, torch.Tensor):
        return {}
    if index.dim():
        dim = dim % index.dim()
        for other in range(index.dim()):  # an expanded index (message passing's) repeats its lines: read one
            if other != dim and index.stride(other) == 0 and index.shape[other] > 1:
                index = index.narrow(other, 0, 1)
    if index.numel() <= SCATTER_INDEX_MAX_READ:
        index = read(index)
        if index is not None:
            return {"targets_repeat": _targets_repeat(index, dim)}
    return {"targets_read": False}  # said, not left out: an empty record is no record (the in-place writes' ops)


def _rrelu_training(args, kwargs, _read) -> dict:
    """rrelu_with_noise's ``training`` flag, and whether autograd records the call (grad mode on, the input
    requiring grad): only then does a backward read the ``noise`` torch-directml's fallback never writes. (Not
    ``autograd_records``: the written-view class reads that key for every in-place op, ``rrelu_with_noise_`` too.)"""
    self = args[0] if args else kwargs.get("self")
    training = args[4] if len(args) > 4 else kwargs.get("training", False)
    return {"training": bool(training),
            "input_grad_taken": torch.is_grad_enabled() and isinstance(self, torch.Tensor) and self.requires_grad}


def _both(first, second):
    """The arguments both of two classes are keyed by, for an op judged for both."""
    def arguments(args, kwargs, read) -> dict:
        return {**first(args, kwargs, read), **second(args, kwargs, read)}
    return arguments


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class Judges:
    """What each overload's arguments are read for (the classes keyed by them), worked out once per overload: the
    ops some class names, and every overload that writes its ``self`` (:func:`writes_its_self`) for the written-view
    class, judged by ``offset_of(view)``: the view's own offset, or where the device's views do not report it the
    offset kept for it. ``of(func)`` is one dict lookup once the overload was seen."""

    def __init__(self, offset_of: Callable = _reported_offset):
        self.written_view = _written_view_under_autograd(offset_of)
        self.named = {
            "aten::nll_loss_forward": _nll_loss(1, 3, 4),
            "aten::nll_loss2d_forward": _nll_loss(1, 3, 4),
            "aten::nll_loss_backward": _nll_loss(2, 4, 5),
            "aten::nll_loss2d_backward": _nll_loss(2, 4, 5),
            "aten::max_pool2d_with_indices": _max_pool(5),
            "aten::max_pool2d_with_indices_backward": _max_pool(6),
            "aten::addmm": _scaled_product,
            "aten::baddbmm": _scaled_product,
            "aten::_to_copy": _copy_between_devices,
            **dict.fromkeys(SCATTER_ACCUMULATING_OPS, _scatter_accumulating),
            **dict.fromkeys(RRELU_OPS, _rrelu_training),
        }
        self._of: dict = {}  # overload (or its name) -> judge, or None

    def of(self, func) -> Optional[Callable]:
        """``judge(args, kwargs, read) -> str`` (the JSON to keep, "" for none) of ``func`` (an OpOverload, or its
        name ``aten::hardtanh_``); None where no class is keyed by its arguments."""
        try:
            return self._of[func]
        except KeyError:
            pass
        from dmlprof.record.frame import op_name
        from dmlprof.record.tap import op_overload

        name = op_name(func)
        named = self.named.get(name)
        judge = _reading(named) if named is not None else None
        if writes_its_self(op_overload(name) if isinstance(func, str) else func):
            # an in-place scatter_add into a slice is judged for both classes; a write alone reads nothing
            judge = _reading(_both(self.written_view, named)) if named is not None else _kept(self.written_view)
        self._of[func] = judge
        return judge


ARGUMENTS = Judges()


def call_arguments(op, args, kwargs, read: Callable = read_device_values, judges: Judges = ARGUMENTS) -> str:
    """The JSON the frame's ``arguments`` column keeps for this call ("" for an op no class is keyed by); ``op``:
    the OpOverload or its name; ``read(tensor)``: its values on the CPU, or None; ``judges``: :data:`ARGUMENTS`
    or a device's own (``Judges(offset_of)``)."""
    judge = judges.of(op)
    return judge(args, kwargs, read) if judge is not None else ""


def _kept(arguments: Callable) -> Callable:
    """``arguments(args, kwargs, read) -> dict`` as the JSON kept ("" for nothing or a call it cannot read)."""
    def judge(args, kwargs, read) -> str:
        try:
            found = arguments(args, kwargs, read)
        except (TypeError, ValueError, RuntimeError, IndexError):
            return ""
        return json.dumps(found, sort_keys=True) if found else ""
    return judge


def _reading(arguments: Callable) -> Callable:
    """:func:`_kept`, for a judge that may read values: its reads are no calls of the program in any profiler
    (a write's judge reads nothing, and runs on every in-place call without this)."""
    kept = _kept(arguments)
    if _enable_record_function is None:
        return kept

    def judge(args, kwargs, read) -> str:
        _enable_record_function(False)
        try:
            return kept(args, kwargs, read)
        finally:
            _enable_record_function(True)
    return judge


def arguments_judge(read: Callable = read_device_values, offset_of: Callable = None) -> Callable:
    """``judge(func, args, kwargs) -> str`` for the recorder: one dict lookup for an overload no class is keyed by
    (:class:`Judges`); ``offset_of(view)``: the offset a view should have, where the device's views do not report
    it (else their own)."""
    judges = ARGUMENTS if offset_of is None else Judges(offset_of)
    of = judges.of

    def judge(func, args, kwargs) -> str:
        found = of(func)
        return found(args, kwargs, read) if found is not None else ""
    return judge


def written_view_judge(offset_of: Callable = None) -> Callable:
    """``judge(func, args, kwargs) -> str`` for the written-view class alone: "" for an overload that does not write
    its ``self`` (:func:`writes_its_self`, worked out once per overload) or a write outside the class; it reads no
    values (the threads the recorder does not record: dmlprof.record.thread_writes)."""
    kept = _kept(_written_view_under_autograd(offset_of or _reported_offset))
    writes: dict = {}

    def judge(func, args, kwargs) -> str:
        found = writes.get(func)
        if found is None:
            found = writes[func] = writes_its_self(func)
        return kept(args, kwargs, None) if found else ""
    return judge
