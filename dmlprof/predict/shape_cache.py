"""A cache of Meta kernels' answers, so a model's repeated calls cost a lookup, not a Meta kernel each.

A model repeats the same calls on the same shapes (every layer of a
transformer), and Meta kernels written in Python cost far more than a lookup.
Keyed by the op and its arguments' metadata; only for ops whose results are
fresh tensors ("fresh") or exactly the tensors they write ("inplace"), with no
shape decided by data. A speed-up only, kept apart so that the kernels
(:mod:`dmlprof.predict.standin`) read the same with or without it.
"""
from __future__ import annotations

from typing import Optional

import torch

from dmlprof.predict.arguments import flat_tensors
from dmlprof.predict.husks import device_tensor

_UNCACHEABLE_TAGS = tuple(getattr(torch.Tag, name) for name in ("inplace_view", "dynamic_output_shape",
                                                                   "data_dependent_output", "nondeterministic_seeded")
                          if hasattr(torch.Tag, name))
_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
_SHAPE_CACHE_MAX = 1 << 16
_shape_cache: dict = {}
_cache_kinds: dict = {}


def cache_kind(overload) -> Optional[str]:
    """"fresh" (returns new tensors), "inplace" (returns the tensors it writes), or None (not cacheable)."""
    known = _cache_kinds.get(overload, False)
    if known is False:
        schema = overload._schema
        returns = schema.returns
        known = None
        if returns and all(str(ret.type) == "Tensor" for ret in returns) and \
                not any(tag in _UNCACHEABLE_TAGS for tag in overload.tags):
            if all(ret.alias_info is None for ret in returns) and not schema.is_mutable:
                known = "fresh"
            elif all(ret.alias_info is not None and ret.alias_info.is_write for ret in returns):
                known = "inplace"
        _cache_kinds[overload] = known
    return known


def _key_part(value):
    if isinstance(value, torch.Tensor):
        return (value.shape, value.stride(), value.storage_offset(), value.dtype, value.device,
                value.is_conj(), value.is_neg())
    if isinstance(value, _SCALARS):
        return (type(value), value)
    if isinstance(value, (list, tuple)):
        return tuple(_key_part(v) for v in value)
    raise TypeError  # not a value the cache can key on


def cache_key(overload, args, kwargs):
    """The call's key in the cache, or None where its answer cannot be cached."""
    kind = cache_kind(overload)
    if kind is None:
        return None
    try:
        return (overload, kind, _key_part(args), tuple((k, _key_part(v)) for k, v in kwargs.items()))
    except TypeError:
        return None


def cached(key, args, kwargs):
    """The cached answer to the call with this key (on these arguments), or None where none is cached."""
    known = _shape_cache.get(key) if key is not None else None
    return _from_cache(known, args, kwargs) if known is not None else None


def remember(key, out, args, kwargs, target) -> None:
    """The Meta kernel's answer ``out`` to the call with this key, kept for the next such call (while room)."""
    if key is None or len(_shape_cache) >= _SHAPE_CACHE_MAX:
        return
    outs = out if isinstance(out, tuple) else (out,)
    if key[1] == "fresh":
        if target is not None and all(isinstance(o, torch.Tensor) and o.device == target for o in outs):
            _shape_cache[key] = ("fresh", target, tuple((tuple(o.shape), o.stride(), o.storage_offset(), o.dtype)
                                                        for o in outs), isinstance(out, tuple))
        return
    if cache_key(key[0], args, kwargs) != key:
        return  # an argument was resized or restrided: not a fixed answer
    flat = flat_tensors((args, tuple(kwargs.values())), [])
    indices = [next((i for i, t in enumerate(flat) if t is o), None) for o in outs]
    if None not in indices:
        _shape_cache[key] = ("inplace", indices, isinstance(out, tuple))


def _from_cache(known, args, kwargs):
    if known[0] == "inplace":
        _, indices, is_tuple = known
        flat = flat_tensors((args, tuple(kwargs.values())), [])
        outs = [flat[i] for i in indices]
    else:
        _, target, geometries, is_tuple = known
        outs = [device_tensor(shape, stride, offset, dtype, target) for shape, stride, offset, dtype in geometries]
    return tuple(outs) if is_tuple else outs[0]
