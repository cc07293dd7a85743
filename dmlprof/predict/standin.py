"""The predicted DirectML device: torch-directml's registrations, as Python kernels that compute no values.

Prediction must take every path torch takes on torch-directml's device, so it is
built the way torch-directml is: kernels on the ``PrivateUse1`` dispatch key for
exactly the ops torch-directml registers (from the shipped op table), a
"fallback" kernel for every op that would reach its boxed CPU fallback, and
nothing for ops torch's own composite kernels cover (the dispatcher runs those,
as it does on the device). The tensors are plain ``torch.Tensor`` objects on
``privateuseone:0`` whose storage holds no memory, not a tensor subclass: a
subclass (or a dispatch mode) makes ATen take its tensor-subclass branches, and
the prediction would describe another program.

Kernels compute only shapes, strides and dtypes, with torch's Meta kernels on
meta copies of their arguments. Where no Meta kernel exists, or the output
depends on values (``nonzero``, ``.item()``), the op runs on the CPU on
placeholder values and is listed in :attr:`StandIn.placeholder_ops`: its name is
certain, shapes after it may not be. A constant the program filled in is known
(see ``constant_of``), and so are the indices a filter found (see ``_VALUES``); other values read
back to the host are 0, and
1.0 for a floating-point scalar (so that checks such as ``min() > 0`` pass); a
bool read is False and ``equal`` says "not equal" (so that ATen's guards on edge
cases, written ``if (is_scalar_tensor_true(...))``, are not taken); an output
whose size depends on values keeps every element (a filter passes everything).

The "fallback" kernel logs the op (the prediction's evidence) and, like the real
fallback, runs the CPU kernel when the tensors are small enough (to learn its
exact output shapes) or fails as the real one does when the CPU has no kernel.
"""
from __future__ import annotations

import functools
import warnings
from collections import Counter
from typing import Optional

import torch

from dmlprof.record.frame import op_name
from dmlprof.record.tap import PerOpKernels

_META = torch.device("meta")
_CPU = torch.device("cpu")
_META_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_EXPLICIT_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd")
_IMPLICIT_KEY = "CompositeImplicitAutograd"
#: torch-directml registers these too, but torch's composite kernels make the same aliases in C++:
#: routed through Python, ``nn.Parameter(t)`` would find a Python object on the alias and refuse it.
_LEFT_TO_TORCH = frozenset({"aten::alias", "aten::detach"})
#: Fallback calls whose tensors hold at most this many elements in all run on the CPU (on placeholder
#: values) to learn the CPU kernel's output shapes; larger ones are computed on meta.
CPU_SHAPES_MAX_ELEMENTS = 1 << 21


def _has_kernel(name: str, key: str) -> bool:
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))
    except RuntimeError:
        return False


@functools.lru_cache(maxsize=None)
def is_composite(name: str) -> bool:
    """Whether this torch has a generic kernel that would serve ``name`` on a backend without its own."""
    return any(_has_kernel(name, key) for key in _EXPLICIT_KEYS + (_IMPLICIT_KEY,))


@functools.lru_cache(maxsize=None)
def cpu_can_run(name: str) -> bool:
    """Whether the CPU fallback can run ``name``: a CPU kernel, or a composite that fills the CPU's slot."""
    return _has_kernel(name, "CPU") or is_composite(name)


# -- tensors without memory ------------------------------------------------------------
class _Husk(torch.Tensor):
    """Only ever constructed to be shed: ``.data`` of a wrapper tensor is a plain tensor on its device."""

    @staticmethod
    def __new__(cls, shape, stride, offset, dtype, device):
        return torch.Tensor._make_wrapper_subclass(cls, shape, strides=stride, storage_offset=offset, dtype=dtype,
                                                   device=device)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"a husk tensor was dispatched ({func})")


#: dtype -> torch-directml's error, for the data types the installed stand-in refuses
_refused: dict = {}


def device_tensor(shape, stride, offset: int, dtype, device: torch.device) -> torch.Tensor:
    """A plain tensor on ``device`` with this geometry and no memory behind it.

    Every device tensor is made here, so here the device refuses what DirectML
    cannot hold, with torch-directml's words, at the op that would create it.
    """
    refused = _refused.get(dtype)
    if refused is not None:
        raise RuntimeError(refused)
    husk = _Husk(tuple(shape), tuple(stride), offset, dtype, device)
    with torch._C._DisableTorchDispatch():
        return husk.data


# -- values a prediction does know: constants ------------------------------------------------
#: Set on a device tensor that is not a view, to the one value all of it holds: filled with a
#: constant (``torch.ones(..., device=dml)``, ``new_zeros``, a CPU tensor of one value moved over) and
#: not written since. Reading such a value is no guess: transformers builds an all-ones attention mask
#: and asks ``mask.all()`` before it leaves the causal mask to SDPA. Views read their base's; a write
#: through any alias forgets it. (An attribute on the tensor, not a table keyed by storage: a Python
#: storage object would stay alive as one more user of the storage, and the autograd engine adds a
#: gradient in place only when nothing else holds it.)
_CONSTANT = "_dmlprof_constant"
#: CPU tensors up to this many elements moved to the device are checked for being one value.
_CONSTANT_CHECK_MAX_ELEMENTS = 1 << 16
#: Set on a device tensor that is not a view, made by an op whose output size depends on values
#: (``nonzero``, ``argwhere``): the values the prediction computed for it, a flat CPU copy of its
#: storage. They follow from the prediction's own rule (every element passes the filter), so code
#: that loops over the indices a filter found visits each in turn as a real run visits the ones it
#: found (Mixtral's ``for expert in expert_hit: self.experts[expert]``), instead of index 0 each time.
#: Read by ``.item()`` and copies to the host; forgotten, like a constant, on any write.
_VALUES = "_dmlprof_values"


def _root(tensor: torch.Tensor) -> torch.Tensor:
    base = tensor._base
    return tensor if base is None else base


def constant_of(tensor) -> Optional[object]:
    """The value every element of a device tensor holds, where the prediction knows it; else None."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type in ("cpu", "meta"):
        return None
    return getattr(_root(tensor), _CONSTANT, None)


def _forget_constant(tensor: torch.Tensor) -> None:
    """``tensor`` was written: what the prediction knew of its values (a constant, computed values) is gone."""
    root = _root(tensor)
    for known in (_CONSTANT, _VALUES):
        if known in root.__dict__:
            delattr(root, known)


def _known_values(tensor: torch.Tensor) -> Optional[torch.Tensor]:
    """A device tensor's values on the CPU, in its geometry, where the prediction computed them; else None."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type in ("cpu", "meta"):
        return None
    values = getattr(_root(tensor), _VALUES, None)
    if values is None:
        return None
    if tensor.storage_offset() + _extent(tensor) > values.numel() or tensor.dtype != values.dtype:
        return None
    with torch._C._DisableTorchDispatch():
        return values.as_strided(tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset()).clone()


def _remember_values(device_out, cpu_out) -> None:
    """Keep the values an op sized by data computed on the CPU with the device tensors it returned."""
    if isinstance(device_out, (list, tuple)) and isinstance(cpu_out, (list, tuple)):
        for device_value, cpu_value in zip(device_out, cpu_out):
            _remember_values(device_value, cpu_value)
        return
    if not (isinstance(device_out, torch.Tensor) and isinstance(cpu_out, torch.Tensor)):
        return
    _forget_constant(device_out)
    if (device_out._base is None and device_out.storage_offset() == 0 and device_out.is_contiguous()
            and cpu_out.is_contiguous() and cpu_out.shape == device_out.shape
            and cpu_out.numel() <= _CONSTANT_CHECK_MAX_ELEMENTS):
        with torch._C._DisableTorchDispatch():
            setattr(device_out, _VALUES, cpu_out.detach().reshape(-1).clone())


def _as_dtype(value, dtype: torch.dtype):
    """``value`` as a tensor of ``dtype`` holds it, or None where it cannot be said (NaN as an integer)."""
    if isinstance(value, complex) and not dtype.is_complex:
        value = value.real  # what copying a complex value into a real tensor keeps
    try:
        if dtype == torch.bool:
            return bool(value)
        if dtype.is_complex:
            return complex(value)
        return float(value) if dtype.is_floating_point else int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _set_constant(tensor: torch.Tensor, value) -> None:
    """``tensor`` was written with ``value`` everywhere (None: with something unknown)."""
    root = _root(tensor)
    _forget_constant(tensor)
    covers = (value is not None and tensor.dtype == root.dtype and tensor.numel() == root.numel()
              and tensor.is_contiguous() and root.is_contiguous()
              and tensor.storage_offset() == root.storage_offset() == 0)
    value = _as_dtype(value, tensor.dtype) if covers else None
    if value is not None:
        setattr(root, _CONSTANT, value)  # kept while C++ holds it (PyObject preservation)


def _value_of(source):
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


def like(meta: torch.Tensor, device: torch.device) -> torch.Tensor:
    return _with_lazy_bits(device_tensor(meta.shape, meta.stride(), meta.storage_offset(), meta.dtype, device), meta)


def _with_lazy_bits(tensor: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``source``'s lazy conjugate and negative bits on ``tensor``: whether a later op materialises
    them (``resolve_conj``'s clone) depends on them."""
    if source.is_conj():
        torch._C._set_conj(tensor, True)
    if source.is_neg():
        torch._C._set_neg(tensor, True)
    return tensor


def _extent(tensor: torch.Tensor) -> int:
    """How many elements of its storage, from its offset on, a tensor's geometry reaches."""
    return 0 if 0 in tensor.shape else 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


def _strided(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A tensor on ``device`` with ``tensor``'s shape, strides and storage offset (zeros where it has memory)."""
    offset = tensor.storage_offset()
    base = torch.zeros(offset + _extent(tensor), dtype=tensor.dtype, device=device)
    return _with_lazy_bits(base.as_strided(tuple(tensor.shape), tuple(tensor.stride()), offset), tensor)


def _meta_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``tensor``'s geometry (its storage offset too)."""
    return _strided(tensor, _META)


def _set_geometry(tensor: torch.Tensor, shape, stride, offset: int) -> None:
    """Give a device tensor a new geometry in place (``resize_``, ``out=`` kernels that resize)."""
    husk = device_tensor(shape, stride, 0, tensor.dtype, tensor.device)
    torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
        _META_KEYS, tensor, husk.untyped_storage(), offset, list(shape), list(stride))


def _elements(values) -> int:
    total = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            total += value.numel()
        elif isinstance(value, (list, tuple)):
            total += _elements(value)
    return total


class _Converted:
    """Arguments with the device's tensors swapped for stand-ins (meta copies or CPU placeholders).

    ``target`` is the device the op's fresh outputs live on: the device of its
    device tensors, or its ``device=`` argument (a factory, a copy to the host).
    """

    def __init__(self, device_type: str, make, outputs_from: str):
        self.device_type = device_type
        self.make = make
        #: the device type fresh results come back on, to be moved to ``target`` ("meta" or "cpu")
        self.outputs_from = outputs_from
        self.originals: dict = {}  # id(stand-in) -> (stand-in, device tensor)
        self.target: Optional[torch.device] = None

    def convert(self, value):
        if isinstance(value, torch.Tensor):
            if value.device.type != self.device_type:
                return value
            self.target = self.target or value.device
            stand_in = self.make(value)
            self.originals[id(stand_in)] = (stand_in, value)
            return stand_in
        if isinstance(value, (list, tuple)):
            return type(value)(self.convert(v) for v in value)
        return value

    def convert_kwargs(self, kwargs: dict) -> dict:
        converted = {key: self.convert(value) for key, value in kwargs.items()}
        device = kwargs.get("device")
        if device is not None:
            self.target = torch.device(device)
            if self.target.type == self.device_type:
                converted["device"] = torch.device(self.outputs_from)
        return converted

    def back(self, value):
        """Outputs on the device again: an argument written in place is returned as itself."""
        if isinstance(value, torch.Tensor):
            known = self.originals.get(id(value))
            if known is not None and known[0] is value:
                original = known[1]
                if tuple(original.shape) != tuple(value.shape) or original.stride() != value.stride():
                    _set_geometry(original, value.shape, value.stride(), value.storage_offset())
                return original
            if value.device.type != self.outputs_from or self.target is None:
                return value
            if self.target.type == self.device_type:
                if value.layout != torch.strided:
                    raise NotImplementedError(_no_sparse_kernel(value.layout))
                return like(value, self.target)
            return _placeholder(value) if value.device.type == "meta" else value
        if isinstance(value, (list, tuple)):
            return type(value)(self.back(v) for v in value)
        return value


_view_source_cache: dict = {}


def _view_sources(overload) -> tuple:
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


def _tensor_slots(overload) -> tuple:
    """Positions of the schema's ``Tensor`` arguments (wrapped numbers arrive there as Python numbers)."""
    return tuple(index for index, argument in enumerate(overload._schema.arguments)
                 if str(argument.type) == "Tensor" and not argument.kwarg_only)


def _rewrapped(args: tuple, slots: tuple) -> tuple:
    """Python numbers in ``Tensor`` slots made 0-dim device tensors again.

    A composite that wraps a scalar (``remainder(x, 5)`` calls ``remainder.Tensor`` with a
    wrapped number) hands it to a Python kernel as a plain number, which most ops' schemas
    refuse when the kernel calls them again. As a 0-dim tensor on the device, of the wrapped
    number's dtype (the default float dtype for a float), it promotes as the wrapped number
    does and becomes a meta copy or a CPU placeholder like any other device argument.
    """
    numbers = [index for index in slots if index < len(args) and isinstance(args[index], (bool, int, float, complex))]
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    if not numbers or device is None:
        return args
    args = list(args)
    for index in numbers:
        args[index] = device_tensor((), (), 0, _number_dtype(args[index]), device)
    return tuple(args)


def _number_dtype(value) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, float):
        return torch.get_default_dtype()
    return torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64


def _no_sparse_kernel(layout) -> str:
    """torch's words where a sparse result would land on a device with no sparse kernels (torch-directml's)."""
    op, key = (("aten::_sparse_coo_tensor_with_dims_and_tensors", "SparsePrivateUse1") if layout == torch.sparse_coo
               else ("aten::_sparse_compressed_tensor_unsafe", "SparseCsrPrivateUse1"))
    return (f"Could not run '{op}' with arguments from the '{key}' backend. This could be because the operator "
            "doesn't exist for this backend (predicted: torch-directml registers no sparse kernels)")


def _placeholder(tensor: torch.Tensor) -> torch.Tensor:
    """The device tensor's known values or constant, else zeros, on the CPU in its geometry (a
    kernel's output strides follow its inputs')."""
    known = _known_values(tensor)
    if known is not None:
        return known
    with torch._C._DisableTorchDispatch():
        placeholder = _strided(tensor, _CPU)
        value = constant_of(tensor)
        return placeholder.fill_(value) if value is not None and placeholder.numel() else placeholder


#: Set on a mask that tests floating-point values for an exact value (``x == 0``, ``isnan``): on a
#: working program's values such a test matches nothing, so a filter on it keeps nothing (ATen's
#: prod backward asks ``(input == 0).nonzero()`` and takes its no-zeros path on real data).
_MATCHES_NOTHING = "_dmlprof_matches_nothing"


def _ones(tensor: torch.Tensor) -> torch.Tensor:
    """A placeholder of ones (True for bool): every element passes a filter, unless it is a mask
    that matches nothing (zeros then)."""
    placeholder = _placeholder(tensor)
    if getattr(tensor, _MATCHES_NOTHING, False) or constant_of(tensor) is not None or _known_values(tensor) is not None:
        return placeholder
    with torch._C._DisableTorchDispatch():
        return placeholder.fill_(1) if placeholder.numel() else placeholder


def _masks_all_true(tensor: torch.Tensor) -> torch.Tensor:
    """Boolean masks all True, other tensors zeros (an index of 0 is in range wherever one is)."""
    return _ones(tensor) if tensor.dtype == torch.bool else _placeholder(tensor)


#: Ops whose output size depends on values, and the placeholders that keep every element. A working
#: program's filters keep elements (proposals survive, some labels are set): on zeros every filter
#: would return nothing, and code after it would take its rare empty-input path (torchvision's
#: batched_nms returns early on no boxes) instead of the one a real run takes.
_SIZED_BY_DATA = {
    **dict.fromkeys(("aten::nonzero", "aten::nonzero.out", "aten::nonzero_numpy", "aten::argwhere"), _ones),
    **dict.fromkeys(("aten::masked_select", "aten::masked_select.out", "aten::index.Tensor",
                     "aten::index.Tensor_out"), _masks_all_true),
}
#: Of those, the ops whose values follow from that rule alone (the indices of the elements kept):
#: the prediction knows them (``_VALUES``).
_FINDS_INDICES = frozenset({"aten::nonzero", "aten::nonzero.out", "aten::nonzero_numpy", "aten::argwhere"})


class StandIn:
    """torch-directml's kernel registrations, in Python, computing shapes only (see the module docstring)."""

    def __init__(self, table, log: list, device_type: str = "privateuseone", float64_support: bool = False):
        self.table = table
        #: most DirectML adapters have no float64 (a setting); none has bfloat16
        self.refused = {torch.bfloat16: _BF16_ERROR}
        if not float64_support:
            self.refused[torch.float64] = _FLOAT64_ERROR
        #: the ops sent to the CPU, in call order (the predicted session's evidence)
        self.log = log
        self.device_type = device_type
        self.placeholder_ops: Counter = Counter()
        self._natives = frozenset(table.registrations.get("PrivateUse1", ())) - _LEFT_TO_TORCH
        autograd = table.registrations.get("AutogradPrivateUse1", ())
        self._kernels = PerOpKernels("PrivateUse1", self._kernel_for, wanted=self._wanted)
        self._autograd = PerOpKernels("AutogradPrivateUse1", self._autograd_kernel_for,
                                      wanted=lambda name: name in autograd)

    # -- registration ---------------------------------------------------------------
    def install(self) -> None:
        _refused.clear()
        _refused.update(self.refused)
        with warnings.catch_warnings():
            # Where a real PrivateUse1 backend is loaded (the emulated device in tests), ours
            # override its kernels for as long as they are installed; torch warns about each.
            warnings.simplefilter("ignore")
            self._kernels.install()
            self._autograd.install()

    def refresh(self) -> None:
        """Kernels for ops defined since install (an extension imported by the model)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._kernels.refresh()
            self._autograd.refresh()

    def remove(self) -> None:
        self._kernels.remove()
        self._autograd.remove()
        _refused.clear()

    def _wanted(self, name: str) -> bool:
        if name in self._natives or name in _ANSWERED:
            return True
        if name in _LEFT_TO_TORCH or is_composite(name) or _has_kernel(name, "PrivateUse1"):
            return False  # torch's generic kernel runs it, or torch registered one of its own (c10d)
        return True  # no kernel of torch-directml's, none of torch's: the boxed fallback

    def _kernel_for(self, overload):
        name = op_name(overload)
        tensor_slots = _tensor_slots(overload)
        if tensor_slots:
            kernel = self._kernel_for_unwrapped(overload, name)
            return lambda keyset, *args, **kwargs: kernel(keyset, *_rewrapped(args, tensor_slots), **kwargs)
        return self._kernel_for_unwrapped(overload, name)

    def _kernel_for_unwrapped(self, overload, name: str):
        if name in _ANSWERED:
            answer = _ANSWERED[name]
            run = lambda args, kwargs: answer(self, overload, args, kwargs)  # noqa: E731
        elif name not in self._natives:
            run = lambda args, kwargs: self.fallback(overload, name, args, kwargs)  # noqa: E731
        elif name in _SPECIAL:
            special = _SPECIAL[name]
            run = lambda args, kwargs: special(self, overload, args, kwargs)  # noqa: E731
        elif _view_sources(overload):
            run = lambda args, kwargs: self.view(overload, args, kwargs)  # noqa: E731
        elif name in _CPU_LAYOUT:
            run = lambda args, kwargs: self.with_cpu_layout(overload, args, kwargs)  # noqa: E731
        else:
            run = lambda args, kwargs: self.compute(overload, args, kwargs)  # noqa: E731
        written = () if name in _CONSTANT_AWARE else _written_arguments(overload)
        if written:
            def run_and_forget(args, kwargs, run=run):
                out = run(args, kwargs)
                for index, key in written:
                    target = kwargs.get(key) if key in kwargs else (args[index] if index < len(args) else None)
                    for tensor in (target if isinstance(target, (list, tuple)) else (target,)):
                        if isinstance(tensor, torch.Tensor) and tensor.device.type == self.device_type:
                            _forget_constant(tensor)
                return out
            return lambda keyset, *args, **kwargs: run_and_forget(args, kwargs)
        return lambda keyset, *args, **kwargs: run(args, kwargs)

    def _autograd_kernel_for(self, overload):
        # torch-directml's own autograd-key kernels: reshape does what torch's composite does, through
        # the dispatcher, so autograd records the views and copies it makes; torchvision::nms (no
        # gradient) runs the device's kernel below autograd, where a recorder sees it as any device op.
        if op_name(overload).startswith("aten::"):
            return lambda keyset, *args, **kwargs: overload.decompose(*args, **kwargs)
        below = torch._C._after_autograd_keyset
        return lambda keyset, *args, **kwargs: overload.redispatch(keyset & below, *args, **kwargs)

    # -- kernels ------------------------------------------------------------------------
    def fallback(self, overload, name: str, args, kwargs):
        """torch-directml's boxed fallback: logged, then the CPU kernel's outputs (shapes only)."""
        self.log.append(name)
        if not cpu_can_run(name):
            raise NotImplementedError(
                f"Could not run '{name}' with arguments from the 'CPU' backend. This could be because the operator "
                "doesn't exist for this backend (predicted: torch-directml's CPU fallback has no kernel to run)")
        if _cache_kind(overload) == "inplace":  # what it returns is its arguments: nothing to learn
            return self.compute(overload, args, kwargs)
        # The CPU kernel's fresh outputs can differ in shape from the Meta kernel's (the CPU's
        # _embedding_bag returns an empty offset2bag for mode "sum"): it is the CPU kernel that runs.
        return self.with_cpu_layout(overload, args, kwargs)

    def view(self, overload, args, kwargs):
        """A view op: its output shares its base's storage, as on the device.

        The Meta kernel of a view op is the generic one every backend shares: run on the device
        tensor itself it makes a view of it (no Python storage object either, which would stay
        alive as one more user of the storage). The autograd engine adds a gradient in place only
        when nothing else holds its storage (``add_`` against ``add``), so views on fresh storage
        would take another path. Where it cannot, the output comes as from any other kernel.
        """
        try:
            return overload.redispatch(_META_KEYS, *args, **kwargs)
        except Exception:  # no generic kernel for this view: its geometry, on fresh storage
            return self.compute(overload, args, kwargs)

    def with_cpu_layout(self, overload, args, kwargs):
        """Outputs laid out as the CPU kernel lays them out (on placeholders, where small enough)."""
        if _elements(args) + _elements(kwargs.values()) <= CPU_SHAPES_MAX_ELEMENTS:
            found = self._on_cpu(overload, args, kwargs)
            if found is not _FAILED:
                return found
        return self.compute(overload, args, kwargs)

    def compute(self, overload, args, kwargs):
        """Outputs from the Meta kernel, else from the CPU kernel on placeholder values."""
        try:
            return self._on_meta(overload, args, kwargs)
        except Exception as exc:  # no Meta kernel, or the output depends on the data
            name = op_name(overload)
            found = self._on_cpu(overload, args, kwargs, _SIZED_BY_DATA.get(name, _placeholder),
                                 values_known=name in _FINDS_INDICES)
            if found is _FAILED:
                raise exc
            self.placeholder_ops[name] += 1
            return found

    def _on_meta(self, overload, args, kwargs):
        key = _cache_key(overload, args, kwargs)
        if key is not None:
            known = _shape_cache.get(key)
            if known is not None:
                return _from_cache(known, args, kwargs)
        converted = _Converted(self.device_type, _meta_copy, "meta")
        meta_args = converted.convert(args)
        meta_kwargs = converted.convert_kwargs(kwargs)
        out = converted.back(overload(*meta_args, **meta_kwargs))
        if key is not None and len(_shape_cache) < _SHAPE_CACHE_MAX:
            _remember(key, out, args, kwargs, converted.target)
        return out

    def _on_cpu(self, overload, args, kwargs, make=None, values_known: bool = False):
        converted = _Converted(self.device_type, make or _placeholder, "cpu")
        cpu_args = converted.convert(args)
        cpu_kwargs = converted.convert_kwargs(kwargs)
        try:
            out = overload(*cpu_args, **cpu_kwargs)
        except Exception:
            return _FAILED
        device_out = converted.back(out)
        if values_known:
            _remember_values(device_out, out)
        return device_out


_FAILED = object()

# -- a cache of Meta kernels' answers --------------------------------------------------------
# A model repeats the same calls on the same shapes (every layer of a transformer), and Meta
# kernels written in Python cost far more than a lookup. Keyed by the op and its arguments'
# metadata; only for ops whose results are fresh tensors ("fresh") or exactly the tensors they
# write ("inplace"), with no shape decided by data.
_UNCACHEABLE_TAGS = tuple(getattr(torch.Tag, name) for name in ("inplace_view", "dynamic_output_shape",
                                                                   "data_dependent_output", "nondeterministic_seeded")
                          if hasattr(torch.Tag, name))
_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
_SHAPE_CACHE_MAX = 1 << 16
_shape_cache: dict = {}
_cache_kinds: dict = {}


def _cache_kind(overload) -> Optional[str]:
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


def _cache_key(overload, args, kwargs):
    kind = _cache_kind(overload)
    if kind is None:
        return None
    try:
        return (overload, kind, _key_part(args), tuple((k, _key_part(v)) for k, v in kwargs.items()))
    except TypeError:
        return None


def _flat_tensors(values, found: list) -> list:
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            _flat_tensors(value, found)
    return found


def _remember(key, out, args, kwargs, target) -> None:
    outs = out if isinstance(out, tuple) else (out,)
    if key[1] == "fresh":
        if target is not None and all(isinstance(o, torch.Tensor) and o.device == target for o in outs):
            _shape_cache[key] = ("fresh", target, tuple((tuple(o.shape), o.stride(), o.storage_offset(), o.dtype)
                                                        for o in outs), isinstance(out, tuple))
        return
    if _cache_key(key[0], args, kwargs) != key:
        return  # an argument was resized or restrided: not a fixed answer
    flat = _flat_tensors((args, tuple(kwargs.values())), [])
    indices = [next((i for i, t in enumerate(flat) if t is o), None) for o in outs]
    if None not in indices:
        _shape_cache[key] = ("inplace", indices, isinstance(out, tuple))


def _from_cache(known, args, kwargs):
    if known[0] == "inplace":
        _, indices, is_tuple = known
        flat = _flat_tensors((args, tuple(kwargs.values())), [])
        outs = [flat[i] for i in indices]
    else:
        _, target, geometries, is_tuple = known
        outs = [device_tensor(shape, stride, offset, dtype, target) for shape, stride, offset, dtype in geometries]
    return tuple(outs) if is_tuple else outs[0]
# torch-directml's own words (dmlprof's known-error table explains them)
_FLOAT64_ERROR = "The GPU device does not support Double (Float64) operations!"
_BF16_ERROR = "Invalid or unsupported data type BFloat16."


# -- kernels whose work is not a shape computation -----------------------------------------
def _copy_into(standin: StandIn, destination: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    value = _value_of(source)
    if destination.device.type != standin.device_type:  # read back to the host: what is known, else zeros
        known = _known_values(source) if value is None and isinstance(source, torch.Tensor) else None
        if value is None and known is None:
            standin.placeholder_ops["aten::copy_"] += 1
        with torch._C._DisableTorchDispatch():
            if known is not None:
                destination.copy_(known)  # the indices a filter found
            else:
                destination.fill_(value) if value is not None else destination.zero_()
    else:
        _set_constant(destination, value)
    return destination


def _copy_(standin, overload, args, kwargs):
    destination, source = args[0], args[1]
    return _copy_into(standin, destination, source)


def _copy_from(standin, overload, args, kwargs):
    source, destination = args[0], args[1]
    return _copy_into(standin, destination, source)


def _copy_from_and_resize(standin, overload, args, kwargs):
    source, destination = args[0], args[1]
    if tuple(destination.shape) != tuple(source.shape):
        destination.resize_(source.shape)
    return _copy_into(standin, destination, source)


def _local_scalar_dense(standin, overload, args, kwargs):
    tensor = args[0]
    value = constant_of(tensor)
    if value is not None:
        return value  # known, not made up
    known = _known_values(tensor)
    if known is not None and known.numel() == 1:
        return known.item()
    standin.placeholder_ops["aten::_local_scalar_dense"] += 1
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        return 1.0
    return False if tensor.dtype == torch.bool else 0


def _equal(standin, overload, args, kwargs):
    # A comparison of values nobody has: "not equal", as a bool read gives False. ATen's
    # is_scalar_tensor_true(t) is equal(t, ones): its guarded edge cases (istft's window check,
    # cov's non-positive normalisation) are then not taken, as they are not on real data.
    standin.placeholder_ops["aten::equal"] += 1
    return False


def _allclose(standin, overload, args, kwargs):
    # Checks written TORCH_CHECK(allclose(...)) (linalg.eig's backward) pass, as on real data. Every
    # op inside torch's composite runs on the device (no fallback to miss); only its answer is made up.
    standin.placeholder_ops["aten::allclose"] += 1
    return True


def _fill(standin, overload, args, kwargs):
    out = standin.compute(overload, args, kwargs)
    _set_constant(out, 0 if op_name(overload) == "aten::zero_" else _value_of(args[1]))
    return out


def _reduce_all_any(standin, overload, args, kwargs):
    out = standin.compute(overload, args, kwargs)
    value = constant_of(args[0])
    if value is not None and len(args) == 1:  # the whole tensor: known when its values are
        _set_constant(out, (value != 0) if args[0].numel() else op_name(overload).startswith("aten::all"))
    else:
        _set_constant(out, None)
    return out


def _exact_match(standin, overload, args, kwargs):
    out = standin.compute(overload, args, kwargs)
    known = constant_of(args[0])
    other = _value_of(args[1]) if known is not None and op_name(overload).startswith("aten::eq.") else None
    _set_constant(out, (known == other) if other is not None else None)
    tested = args[0] if args else kwargs.get("self")
    if isinstance(out, torch.Tensor) and isinstance(tested, torch.Tensor) and (
            tested.is_floating_point() or tested.is_complex()):
        setattr(out, _MATCHES_NOTHING, True)  # kept with the tensor while C++ holds it (PyObject preservation)
    return out


def _set_(standin, overload, args, kwargs):
    # Storage-level: the tensor takes another device tensor's (memoryless) storage; Meta's kernel
    # does exactly the bookkeeping, on the device tensor itself.
    return overload.redispatch(_META_KEYS, *args, **kwargs)


def _convolution_overrideable(standin, overload, args, kwargs):
    (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups) = args
    out = standin.compute(torch.ops.aten.convolution.default,
                          (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups), {})
    wanted = _cpu_convolution_layout(input, weight)
    if wanted is None or out.is_contiguous(memory_format=wanted):
        return out
    laid_out = torch.empty(out.shape, dtype=out.dtype, device=_META, memory_format=wanted)
    return device_tensor(out.shape, laid_out.stride(), 0, out.dtype, out.device)


def _cpu_convolution_layout(input: torch.Tensor, weight: torch.Tensor) -> Optional[torch.memory_format]:
    """The channels-last layout the CPU's convolution gives its output, where it gives one.

    ATen's CPU backends (oneDNN, and the slow kernels for 2-D) lay the output out channels-last when
    the input or the weight is channels-last (``_determine_backend_memory_format``); newer torch's
    Meta kernel answers contiguous there (ConvNeXt's and SegFormer's convolutions on permuted
    activations), and whether the next ``reshape`` is a view or an alias, and what pooling does,
    follows from it.
    """
    channels_last = {4: torch.channels_last, 5: torch.channels_last_3d}.get(input.dim())
    if channels_last is None:
        return None
    from torch._prims_common import suggest_memory_format

    if channels_last in (suggest_memory_format(input), suggest_memory_format(weight)):
        return channels_last
    return None


def _convolution_backward_overrideable(standin, overload, args, kwargs):
    (grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask) = args
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    call = (torch.ops.aten.convolution_backward.default,
            (grad_output, input, weight, [channels], stride, padding, dilation, transposed, output_padding, groups,
             output_mask), {})
    if _elements(args) <= CPU_SHAPES_MAX_ELEMENTS:
        # The CPU kernel's gradient strides, as the device's (newer torch's Meta kernel lays the weight's
        # gradient out otherwise, and AccumulateGrad would then copy it to the weight's layout)
        found = standin._on_cpu(*call)
        if found is not _FAILED:
            return found
    return standin.compute(*call)


_SPECIAL = {
    "aten::copy_": _copy_,
    "aten::_copy_from": _copy_from,
    "aten::_copy_from_and_resize": _copy_from_and_resize,
    "aten::_local_scalar_dense": _local_scalar_dense,
    "aten::equal": _equal,
    # ``x == c`` reaches the out= kernels through torch's structured wrappers; isnan/isinf are direct
    **dict.fromkeys(("aten::eq.Scalar_out", "aten::eq.Tensor_out", "aten::isnan", "aten::isnan.out",
                     "aten::isinf", "aten::isinf.out"), _exact_match),
    **dict.fromkeys(("aten::fill_.Scalar", "aten::fill_.Tensor", "aten::zero_"), _fill),
    **dict.fromkeys(("aten::all.all_out", "aten::any.all_out"), _reduce_all_any),
    "aten::set_.source_Storage": _set_,
    "aten::set_.source_Storage_storage_offset": _set_,
    "aten::set_.source_Tensor": _set_,
    # Only a device backend implements these (their CPU and Meta entries throw): their outputs'
    # shapes come from the generic op they stand for.
    "aten::convolution_overrideable": _convolution_overrideable,
    "aten::convolution_backward_overrideable": _convolution_backward_overrideable,
}
#: Kernels that keep the known constants themselves (the others forget those of the tensors they write).
_CONSTANT_AWARE = frozenset({"aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::fill_.Scalar",
                             "aten::fill_.Tensor", "aten::zero_", "aten::all.all_out", "aten::any.all_out",
                             "aten::eq.Scalar_out", "aten::eq.Tensor_out", "aten::nonzero.out"})


def _written_arguments(overload) -> tuple:
    """(position, name) of the arguments an op writes (``self`` of an in-place op, ``out=``)."""
    return tuple((index, argument.name) for index, argument in enumerate(overload._schema.arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write)


#: Device kernels whose outputs newer torch's Meta kernels lay out otherwise than the CPU kernel the
#: device's results follow (what later calls do depends on it: a view or a copy, a gradient accumulated
#: in place or copied to the parameter's layout).
_CPU_LAYOUT = frozenset({"aten::native_layer_norm_backward"})
#: Composite ops whose whole answer is a value read from the device: answered here, in one call,
#: instead of by torch's composite reading placeholder values.
_ANSWERED = {"aten::allclose": _allclose}
