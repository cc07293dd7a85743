"""What an op's schema says of its arguments: which it reads, which it only writes, which a return is a view of.

The stand-in's kernels are generic (one Python function serves hundreds of
overloads), so what a hand-written kernel would know of its own arguments is
read here from the overload's schema, once per overload (cached). Torch only:
nothing here knows of the stand-in device or its values.
"""
from __future__ import annotations

import functools

import torch

from dmlprof.directml.unmarked_writes import unmarked_written_slots

_SEEDED = getattr(torch.Tag, "nondeterministic_seeded", None)
_view_source_cache: dict = {}


def view_sources(overload) -> tuple:
    """``(return index, argument index)`` for each return that is a view of an argument (``Tensor(a)``)."""
    known = _view_source_cache.get(overload)
    if known is None:
        schema = overload._schema
        arguments = [(index, argument.alias_info.before_set) for index, argument in enumerate(schema.arguments)
                     if argument.alias_info is not None and not argument.kwarg_only]
        pairs = []
        for ret_index, ret in enumerate(schema.returns):
            if ret.alias_info is None or ret.alias_info.is_write:
                continue
            source = next((index for index, sets in arguments if sets & ret.alias_info.before_set), None)
            if source is not None:
                pairs.append((ret_index, source))
        known = _view_source_cache[overload] = tuple(pairs)
    return known


def tensor_slots(overload) -> tuple:
    """Positions of the schema's ``Tensor`` arguments (wrapped numbers arrive there as Python numbers)."""
    return tuple(index for index, argument in enumerate(overload._schema.arguments)
                 if str(argument.type) == "Tensor" and not argument.kwarg_only)


@functools.lru_cache(maxsize=None)
def _written_only_slots(overload) -> tuple:
    """(position, name) of the arguments an op writes without reading: its ``out=`` tensors, and the
    tensor an in-place random op fills (``normal_``, ``uniform_``: ``nn.init`` on a device tensor)."""
    fills = _SEEDED is not None and _SEEDED in overload.tags and overload._schema.name.endswith("_")
    return tuple((index, argument.name) for index, argument in enumerate(overload._schema.arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write
                 and (argument.kwarg_only or (fills and index == 0)))


@functools.lru_cache(maxsize=None)
def _written_slots(overload) -> tuple:
    """(position, name) of the arguments an op writes (``self`` of an in-place op, ``out=``)."""
    return tuple((index, argument.name) for index, argument in enumerate(overload._schema.arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write)


def unmarked_written(overload, args, kwargs) -> list:
    """The arguments an op's CPU kernel writes though its schema does not mark them (BatchNorm's running
    statistics: :mod:`dmlprof.directml.unmarked_writes`)."""
    return _given(unmarked_written_slots(overload), args, kwargs)


def _given(slots: tuple, args, kwargs) -> list:
    """The arguments in these (position, name) slots, as the call passed them (None where it did not)."""
    return [kwargs.get(key) if key in kwargs else (args[index] if index < len(args) else None)
            for index, key in slots]


def written_only(overload, args, kwargs) -> list:
    """The arguments an op writes without reading them."""
    return _given(_written_only_slots(overload), args, kwargs)


def written(overload, args, kwargs) -> list:
    """The arguments an op writes."""
    return _given(_written_slots(overload), args, kwargs)


def read_arguments(overload, args, kwargs) -> list:
    """Every argument but those the op only writes (an in-place ``add_`` reaching ``add.out`` with
    ``out=self`` reads its ``self``: that is an argument like any other)."""
    slots = _written_only_slots(overload)
    if not slots:
        return [args, tuple(kwargs.values())]
    positions, names = {index for index, _ in slots}, {name for _, name in slots}
    return [tuple(a for i, a in enumerate(args) if i not in positions),
            tuple(v for k, v in kwargs.items() if k not in names)]


def flat_tensors(values, found: list) -> list:
    """The tensors in ``values`` (nested lists and tuples), appended to ``found`` in order."""
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            flat_tensors(value, found)
    return found


def elements(values) -> int:
    """How many elements the tensors in ``values`` (nested lists and tuples) hold in all."""
    total = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            total += value.numel()
        elif isinstance(value, (list, tuple)):
            total += elements(value)
    return total


@functools.lru_cache(maxsize=None)
def _out_names(overload) -> tuple:
    """The names of an op's ``out=`` tensors (not lists of them); none for a reference computing a device-only op's
    values (:data:`dmlprof.predict.references.VALUE_REFERENCES`, a Python function: it has no schema)."""
    schema = getattr(overload, "_schema", None)
    if schema is None:
        return ()
    return tuple(argument.name for argument in schema.arguments
                 if argument.kwarg_only and argument.alias_info is not None and argument.alias_info.is_write
                 and str(argument.type) == "Tensor")


def run_sizing_outs_after(overload, args, kwargs):
    """``overload`` on CPU tensors, its ``out=`` tensors sized to its result afterwards, as a backend's own
    kernel does (torch's "was resized" warning where a given out had another shape, none where it had the one).

    The CPU kernel handed a given out may resize it on its way instead: ``mse_loss.out``'s shares its meta
    with the unreduced loss, so the 0-d out that torch's functional ``mse_loss`` allocates is first "resized"
    to the inputs' shape, a warning real torch-directml never prints. So the kernel writes into fresh outs of
    no elements (resized silently) and each given out takes the result. Where a given out had another shape,
    the kernel runs again on it for torch's own resize and warning (Python cannot reach the CPU's check); a
    random op is never run twice (it would draw twice from the generator), so it writes its outs itself.
    """
    given = {name: kwargs[name] for name in _out_names(overload)
             if isinstance(kwargs.get(name), torch.Tensor) and kwargs[name].numel()}
    if not given or (_SEEDED is not None and _SEEDED in overload.tags):
        return overload(*args, **kwargs)
    fresh = {name: torch.empty(0, dtype=tensor.dtype, device=tensor.device) for name, tensor in given.items()}
    result = overload(*args, **{**kwargs, **fresh})
    if any(fresh[name].shape != tensor.shape for name, tensor in given.items()):
        return overload(*args, **kwargs)
    for name, tensor in given.items():
        tensor.copy_(fresh[name])
    swapped = {id(fresh[name]): tensor for name, tensor in given.items()}
    if isinstance(result, (tuple, list)):
        return type(result)([swapped.get(id(value), value) for value in result])
    return swapped.get(id(result), result)
