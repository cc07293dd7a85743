"""The predicted DirectML device: torch-directml's registrations, as Python kernels on tensors without memory.

Prediction must take every path torch takes on torch-directml's device, so it is
built the way torch-directml is: kernels on the ``PrivateUse1`` dispatch key for
exactly the ops torch-directml registers (from the shipped op table), a
"fallback" kernel for every op that would reach its boxed CPU fallback, and
nothing for ops torch's own composite kernels cover (the dispatcher runs those,
as it does on the device). The tensors are plain ``torch.Tensor`` objects on
``privateuseone:0`` whose storage holds no memory, not a tensor subclass: a
subclass (or a dispatch mode) makes ATen take its tensor-subclass branches, and
the prediction would describe another program.

Values, where they can be afforded (:mod:`dmlprof.predict.values`): a kernel
whose device arguments all carry values runs the CPU kernel on them, as the
emulated device does, and its outputs carry the results; so a branch that reads
a tensor takes the branch a run on the device takes. Beyond the budget (or from
tensors made on the meta device) kernels compute only shapes, strides and
dtypes, with torch's Meta kernels on meta copies of their arguments. Where no
Meta kernel exists, or the output depends on values (``nonzero``, ``.item()``),
such an op runs on the CPU on placeholder values: a constant the program filled
in is known (``constant_of``), other values read back to the host are 0, and
1.0 for a floating-point scalar (so that checks such as ``min() > 0`` pass); a
bool read is False and ``equal`` says "not equal" (so that ATen's guards on edge
cases, written ``if (is_scalar_tensor_true(...))``, are not taken); an output
whose size depends on values keeps every element (a filter passes everything).
Each such value is made up: the op is listed in :attr:`StandIn.placeholder_ops`,
and the first one in :attr:`StandIn.first_guess`, since every call after it may
follow a path a real run does not.

The "fallback" kernel logs the op (the prediction's evidence) and, like the real
fallback, runs the CPU kernel (on values, or on placeholders when the tensors
are small enough, to learn its exact output shapes) or fails as the real one
does when the CPU has no kernel.
"""
from __future__ import annotations

import functools
import time
import warnings
from collections import Counter
from typing import NamedTuple, Optional

import torch

from dmlprof.directml.failures import (
    ALWAYS_FAILING_COMPOSITES, UNHELD_DTYPES, DirectMLFailure, failure, may_fail, unheld_dtype_failure,
)
from dmlprof.predict import values as _values
from dmlprof.predict.values import (
    WHY_EMPTY, WHY_META, ValueStore, constant_of, cpu_view, extent as _extent, forget, has_values, set_constant, unknown_why,
)
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


_OPAQUE = "_dmlprof_opaque"
#: dtype -> the exception torch-directml's refusal of it is, for the data types the installed stand-in refuses
_refused: dict = {}


def device_tensor(shape, stride, offset: int, dtype, device: torch.device) -> torch.Tensor:
    """A plain tensor on ``device`` with this geometry and no memory behind it.

    Every device tensor is made here, so here the device refuses what DirectML
    cannot hold, with torch-directml's words, at the op that would create it
    (a complex tensor ends the real process: said as such).
    """
    refused = _refused.get(dtype)
    if refused is not None:
        raise refused()
    husk = _Husk(tuple(shape), tuple(stride), offset, dtype, device)
    with torch._C._DisableTorchDispatch():
        tensor = husk.data
    _values.born(tensor, (offset + _extent(tensor)) * tensor.element_size())
    # torch-directml's tensors have no storage (an OpaqueTensorImpl), so the autograd engine never adds a
    # gradient into one in place: it does so only for a tensor that solely owns its storage. A second tensor
    # on the same storage, held by this one (kept while C++ holds it: PyObject preservation), keeps that
    # ownership from ever being sole, and the engine adds out of place (add, not add_), as on the device.
    # (Not a Python storage object: on newer torch one would keep its storage alive for ever.)
    setattr(tensor, _OPAQUE, husk_alias(tensor))
    return tensor


def husk_alias(tensor: torch.Tensor) -> torch.Tensor:
    with torch._C._DisableTorchDispatch():
        return torch.Tensor._make_subclass(torch.Tensor, tensor)


# -- values a prediction does know: constants of tensors without values ---------------------------
#: CPU tensors up to this many elements copied to a device tensor without values are checked for being one value.
_CONSTANT_CHECK_MAX_ELEMENTS = 1 << 16


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

    def __init__(self, device_type: str, make, outputs_from: str, values: Optional[ValueStore] = None):
        self.device_type = device_type
        self.make = make
        #: the device type fresh results come back on, to be moved to ``target`` ("meta" or "cpu")
        self.outputs_from = outputs_from
        #: where the CPU's results are the op's values, the store that keeps them with the device's outputs
        self.values = values
        self.originals: dict = {}  # id(stand-in) -> (stand-in, device tensor, the stand-in's shape and strides)
        self.target: Optional[torch.device] = None

    def convert(self, value):
        if isinstance(value, torch.Tensor):
            if value.device.type != self.device_type:
                return value
            self.target = self.target or value.device
            stand_in = self.make(value)
            self.originals[id(stand_in)] = (stand_in, value, tuple(stand_in.shape), stand_in.stride())
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
                original, shape, stride = known[1:]
                if tuple(value.shape) != shape or value.stride() != stride:  # the kernel resized or restrided it
                    _set_geometry(original, value.shape, value.stride(), value.storage_offset())
                    if self.values is not None:  # resized on fresh storage: the values resized with it
                        self.values.keep(original, value)
                return original
            if value.device.type != self.outputs_from or self.target is None:
                return value
            if self.target.type == self.device_type:
                if value.layout != torch.strided:
                    raise NotImplementedError(_no_sparse_kernel(value.layout))
                out = like(value, self.target)
                if self.values is not None:
                    self.values.keep(out, value)
                return out
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


def _rewrapped(args: tuple, slots: tuple, store: ValueStore) -> tuple:
    """Python numbers in ``Tensor`` slots made 0-dim device tensors again, holding the number.

    A composite that wraps a scalar (``remainder(x, 5)`` calls ``remainder.Tensor`` with a
    wrapped number) hands it to a Python kernel as a plain number, which most ops' schemas
    refuse when the kernel calls them again. As a 0-dim tensor on the device, of the wrapped
    number's dtype (the default float dtype for a float), it promotes as the wrapped number
    does and becomes a CPU view of its value, a meta copy or a CPU placeholder like any other
    device argument.
    """
    numbers = [index for index in slots if index < len(args) and isinstance(args[index], (bool, int, float, complex))]
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    if not numbers or device is None:
        return args
    args = list(args)
    for index in numbers:
        number, dtype = args[index], _number_dtype(args[index])
        args[index] = device_tensor((), (), 0, dtype, device)
        with torch._C._DisableTorchDispatch():
            store.keep(args[index], torch.tensor(number, dtype=dtype))
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
    """A copy of the device tensor's values, else its constant, else zeros, on the CPU in its geometry
    (a kernel's output strides follow its inputs'); what a kernel writes into it is not kept."""
    if has_values(tensor):
        with torch._C._DisableTorchDispatch():
            view = cpu_view(tensor)
            return _with_lazy_bits(torch.empty_strided(view.shape, view.stride(), dtype=view.dtype).copy_(view), view)
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
    if getattr(tensor, _MATCHES_NOTHING, False) or constant_of(tensor) is not None or has_values(tensor):
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


class Guess(NamedTuple):
    """The first value a prediction made up: when (``time.perf_counter_ns``), in which op, and why."""

    time_ns: int
    op: str
    why: str


class StandIn:
    """torch-directml's kernel registrations, in Python, on tensors without memory (see the module docstring)."""

    def __init__(self, table, log: list, device_type: str = "privateuseone", float64_support: bool = False,
                 values: Optional[ValueStore] = None):
        self.table = table
        #: what the prediction knows of the device's values, within its budget
        self.values = values if values is not None else ValueStore()
        #: the first value made up (every call after it may follow another path than a real run's)
        self.first_guess: Optional[Guess] = None
        #: most DirectML adapters have no float64 (a setting); a bfloat16 or complex tensor ends the process
        self.refused = {dtype: (lambda dtype=dtype: DirectMLFailure(unheld_dtype_failure(dtype)))
                        for dtype in UNHELD_DTYPES}
        if not float64_support:
            self.refused[torch.float64] = lambda: RuntimeError(_FLOAT64_ERROR)
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
        _values.install(self.values)
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
        _values.install(None)

    def _wanted(self, name: str) -> bool:
        if name in self._natives or name in _ANSWERED or name in ALWAYS_FAILING_COMPOSITES:
            return True
        if name in _LEFT_TO_TORCH or is_composite(name) or _has_kernel(name, "PrivateUse1"):
            return False  # torch's generic kernel runs it, or torch registered one of its own (c10d)
        return True  # no kernel of torch-directml's, none of torch's: the boxed fallback

    def _kernel_for(self, overload):
        name = op_name(overload)
        tensor_slots = _tensor_slots(overload)
        kernel = self._kernel_for_unwrapped(overload, name)
        if tensor_slots:
            store = self.values
            return lambda keyset, *args, **kwargs: kernel(keyset, *_rewrapped(args, tensor_slots, store), **kwargs)
        return kernel

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
        if may_fail(name):  # calls DirectML refuses (measured: dmlprof.directml.failures) fail here as there
            run = _failing_as_on_directml(run, name, self.device_type, torch.float64 not in self.refused)
        return lambda keyset, *args, **kwargs: run(args, kwargs)

    def _autograd_kernel_for(self, overload):
        # torch-directml's own autograd-key kernels: reshape does what torch's composite does, through
        # the dispatcher, so autograd records the views and copies it makes; torchvision::nms (no
        # gradient) runs the device's kernel below autograd, where a recorder sees it as any device op.
        if op_name(overload) == "aten::reshape":
            return lambda keyset, *args, **kwargs: directml_reshape(*args, **kwargs)
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
        """Outputs laid out as the CPU kernel lays them out: on values, else on placeholders where small enough."""
        why = self.why_no_values(args, kwargs, overload)
        if why is not None and _elements(args) + _elements(kwargs.values()) <= CPU_SHAPES_MAX_ELEMENTS:
            found = self._on_placeholders(overload, args, kwargs, why, _SIZED_BY_DATA.get(op_name(overload)))
            if found is not _FAILED:
                return found
        return self.compute(overload, args, kwargs)

    def compute(self, overload, args, kwargs):
        """Outputs with values from the CPU kernel where every device argument has values; else shapes only."""
        why = self.why_no_values(args, kwargs, overload)
        if why is _CONSTANT_STAYS:
            found = self._folded(overload, args, kwargs)
            if found is not _FAILED:
                return found
            why = None if all(self.values.materialize(t) is None for t in _flat_tensors(
                _read_arguments(overload, args, kwargs), []) if t.device.type == self.device_type) else why
        if why is None:
            found = self._on_values(overload, args, kwargs)
            if found is not _FAILED:
                return found
            why = f"{op_name(overload)} did not run on the CPU"
        return self.shapes_only(overload, args, kwargs, why)

    def shapes_only(self, overload, args, kwargs, why: str):
        """Outputs from the Meta kernel, else from the CPU kernel on placeholder values; none has values."""
        try:
            out = self._on_meta(overload, args, kwargs)
        except Exception as exc:  # no Meta kernel, or the output depends on the data
            name = op_name(overload)
            out = self._on_placeholders(overload, args, kwargs, why, _SIZED_BY_DATA.get(name, _placeholder),
                                        values_made_up=name in _FINDS_INDICES)
            if out is _FAILED:
                raise exc
            return out
        _forget_written(overload, args, kwargs, out, why)
        return out

    def why_no_values(self, args, kwargs, overload) -> Optional[str]:
        """Why an op on these arguments is not computed on values (a sentence), or None where it is.

        A tensor the op only writes (``out=``, the tensor a random op fills) gets values when it runs
        (``_on_values``). A tensor that holds a known constant gets values once every other one has some;
        one ``torch.empty`` made and nothing wrote holds nothing worth reading.
        """
        tensors = _flat_tensors(_read_arguments(overload, args, kwargs), [])
        if any(tensor.device.type == "meta" for tensor in tensors):
            return WHY_META
        device_tensors = [t for t in tensors if t.device.type == self.device_type]
        lacking = [tensor for tensor in device_tensors if not has_values(tensor)]
        for tensor in lacking:
            if constant_of(tensor) is None:
                return unknown_why(tensor)
        why = self.values.refuses_op(sum(t.numel() for t in device_tensors))
        if lacking and why is None and _CONSTANT_STAYS in _folds(overload, device_tensors, lacking):
            return _CONSTANT_STAYS
        for tensor in lacking:
            why = why or self.values.materialize(tensor)
        return why

    def _folded(self, overload, args, kwargs):
        """A pointwise op on constants (and numbers): its outputs hold one constant too, computed once on
        one element of each (Adam's ``exp_avg_sq * beta2`` on zeros), so no memory need hold them."""
        try:
            out = self._on_meta(overload, args, kwargs)
            converted = _Converted(self.device_type, _one_element, "cpu")
            value = overload(*converted.convert(args), **converted.convert_kwargs(kwargs))
        except Exception:
            return _FAILED
        values = value if isinstance(value, (list, tuple)) else (value,)
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if len(values) != len(outs) or not all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in values):
            return _FAILED
        for device_out, cpu_value in zip(outs, values):
            set_constant(device_out, cpu_value.item(), _CONSTANT_STAYS)
        return out

    def made_up(self, name: str, why: str) -> None:
        """``name`` made a value up (a read, a shape, a comparison) because an input had none, ``why``."""
        self.placeholder_ops[name] += 1
        if self.first_guess is None:
            self.first_guess = Guess(time.perf_counter_ns(), name, why)

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

    def _on_values(self, overload, args, kwargs):
        """The CPU kernel on the device tensors' values: what it writes and returns is the device's.

        Its arguments are what torch's CPU fallback (the emulated device's kernels) hands the CPU kernel:
        a tensor as ``.to("cpu")`` copies it, in its own strides where it is dense, contiguous where it
        is not (a slice with gaps); a reduction's order, and so its last bits, follows the strides, and
        a branch on a value at a threshold follows those. A dense tensor is its values themselves, so
        what the kernel writes into it is kept; a copy is copied back.
        """
        for tensor in _flat_tensors(_written_only(overload, args, kwargs), []):
            if tensor.device.type == self.device_type and not _given_values(self, tensor):
                return _FAILED  # written only in part, where the rest of its storage is unknown
        copies: list = []
        converted = _Converted(self.device_type, lambda tensor: _as_fallback_hands_it(tensor, copies), "cpu",
                               self.values)
        cpu_args = converted.convert(args)
        cpu_kwargs = converted.convert_kwargs(kwargs)
        started = time.perf_counter()
        try:
            out = overload(*cpu_args, **cpu_kwargs)
        except Exception:
            return _FAILED
        finally:
            self.values.timed(started)
        device_out = converted.back(out)
        if copies:
            _copy_back_written(overload, args, kwargs, copies)
        return device_out

    def _on_placeholders(self, overload, args, kwargs, why: str, make=None, values_made_up: bool = False):
        """The CPU kernel on placeholder values, for its outputs' shapes and strides; none keeps values
        (but the indices a filter found on placeholders, ``values_made_up``). An output sized by the
        data is made up."""
        converted = _Converted(self.device_type, make or _placeholder, "cpu")
        cpu_args = converted.convert(args)
        cpu_kwargs = converted.convert_kwargs(kwargs)
        try:
            out = overload(*cpu_args, **cpu_kwargs)
        except Exception:
            return _FAILED
        device_out = converted.back(out)
        _forget_written(overload, args, kwargs, device_out, why)
        name = op_name(overload)
        if name in _SIZED_BY_DATA or _sized_by_data(overload):
            self.made_up(name, why)
        if values_made_up:
            _remember_values(device_out, out, self.values)
        return device_out


_FAILED = object()
_SEEDED = getattr(torch.Tag, "nondeterministic_seeded", None)
_POINTWISE = getattr(torch.Tag, "pointwise", None)
#: why a pointwise op on constants is not computed on values: its outputs hold a constant (``_folded``)
_CONSTANT_STAYS = "a constant, computed once (pointwise on constants)"


def _folds(overload, device_tensors, lacking) -> tuple:
    """``(_CONSTANT_STAYS,)`` where a pointwise op's device inputs are all constants or single values."""
    if _POINTWISE is None or _POINTWISE not in overload.tags:
        return ()
    if any(t.numel() > 1 for t in device_tensors if not any(t is c for c in lacking)):
        return ()  # a tensor of real values: the result is one too
    return (_CONSTANT_STAYS,)


def _one_element(tensor: torch.Tensor) -> torch.Tensor:
    """One element of a device tensor holding one value (a constant, or a 0-dim tensor's value)."""
    with torch._C._DisableTorchDispatch():
        if has_values(tensor):
            return cpu_view(tensor).reshape(-1)[:1].reshape(()).clone()
        value = constant_of(tensor)
        return torch.full((), value if value is not None else 0, dtype=tensor.dtype)


@functools.lru_cache(maxsize=None)
def _written_only_slots(overload) -> tuple:
    """(position, name) of the arguments an op writes without reading: its ``out=`` tensors, and the
    tensor an in-place random op fills (``normal_``, ``uniform_``: ``nn.init`` on a device tensor)."""
    fills = _SEEDED is not None and _SEEDED in overload.tags and overload._schema.name.endswith("_")
    return tuple((index, argument.name) for index, argument in enumerate(overload._schema.arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write
                 and (argument.kwarg_only or (fills and index == 0)))


def _written_only(overload, args, kwargs) -> list:
    return [kwargs.get(key) if key in kwargs else (args[index] if index < len(args) else None)
            for index, key in _written_only_slots(overload)]


def _read_arguments(overload, args, kwargs) -> list:
    """Every argument but those the op only writes (an in-place ``add_`` reaching ``add.out`` with
    ``out=self`` reads its ``self``: that is an argument like any other)."""
    slots = _written_only_slots(overload)
    if not slots:
        return [args, tuple(kwargs.values())]
    positions, names = {index for index, _ in slots}, {name for _, name in slots}
    return [tuple(a for i, a in enumerate(args) if i not in positions),
            tuple(v for k, v in kwargs.items() if k not in names)]


def _empty(standin, overload, args, kwargs):
    # Arbitrary bytes, on the device as on the CPU: no values are kept until something writes them
    # (a model moved with to_empty() holds none: 7 billion parameters built on meta cost no memory).
    return standin.shapes_only(overload, args, kwargs, WHY_EMPTY)


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


def _failing_as_on_directml(run, name: str, device_type: str, float64: bool):
    def checked(args, kwargs):
        found = failure(name, args, kwargs, device_type, float64)
        if found is not None:
            raise DirectMLFailure(found)
        return run(args, kwargs)
    return checked

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


# -- kernels whose work is not a shape computation -----------------------------------------
def _host_values(tensor: torch.Tensor) -> Optional[torch.Tensor]:
    """A tensor's values as a CPU tensor (itself on the host, its values on the device), or None."""
    if tensor.device.type == "cpu":
        return tensor
    return cpu_view(tensor) if tensor.device.type != "meta" and has_values(tensor) else None


def _why_unknown(tensor: torch.Tensor) -> str:
    return WHY_META if tensor.device.type == "meta" else unknown_why(tensor)


def _given_values(standin: StandIn, tensor: torch.Tensor) -> bool:
    """Whether a device tensor about to be written has values, or can be given fresh ones: it is all of its
    storage, or its storage holds what ``torch.empty`` made (arbitrary bytes) or a constant."""
    if has_values(tensor) or standin.values.materialize(tensor) is None:
        return True
    if not standin.values.covers_storage(tensor):
        return False  # a part of a storage whose other values are unknown
    with torch._C._DisableTorchDispatch():
        fresh = torch.empty(tuple(tensor.shape), dtype=tensor.dtype)
    return standin.values.keep(tensor, fresh) is None


def _copy_into(standin: StandIn, destination: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    values = _host_values(source) if isinstance(source, torch.Tensor) else None
    if destination.device.type != standin.device_type:  # read back to the host: the values, a constant, else zeros
        with torch._C._DisableTorchDispatch():
            if values is not None:
                return destination.copy_(values)
            value = _value_of(source)
            if value is None:
                standin.made_up("aten::copy_", _why_unknown(source))
            return destination.fill_(value) if value is not None else destination.zero_()
    if values is not None and _given_values(standin, destination):
        with torch._C._DisableTorchDispatch():
            cpu_view(destination).copy_(values)
    else:
        why = unknown_why(destination) if values is not None else _why_unknown(source)
        set_constant(destination, _value_of(source), why)
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


def _on_values_if_known(standin: StandIn, overload, args, kwargs):
    """The op's answer computed on values, or ``_FAILED`` where an argument has none."""
    if standin.why_no_values(args, kwargs, overload) is not None:
        return _FAILED
    return standin._on_values(overload, args, kwargs)


def _first_unknown_why(standin: StandIn, args) -> str:
    unknown = [t for t in _flat_tensors(args, []) if t.device.type != "cpu" and _host_values(t) is None]
    return _why_unknown(unknown[0]) if unknown else "beyond the prediction's budget for values"


def _local_scalar_dense(standin, overload, args, kwargs):
    tensor = args[0]
    if has_values(tensor):
        with torch._C._DisableTorchDispatch():
            return cpu_view(tensor).item()
    value = constant_of(tensor)
    if value is not None:
        return value  # known, not made up
    standin.made_up("aten::_local_scalar_dense", unknown_why(tensor))
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        return 1.0
    return False if tensor.dtype == torch.bool else 0


def _equal(standin, overload, args, kwargs):
    found = _on_values_if_known(standin, overload, args, kwargs)
    if found is not _FAILED:
        return found
    # A comparison of values nobody has: "not equal", as a bool read gives False. ATen's
    # is_scalar_tensor_true(t) is equal(t, ones): its guarded edge cases (istft's window check,
    # cov's non-positive normalisation) are then not taken, as they are not on real data.
    standin.made_up("aten::equal", _first_unknown_why(standin, args))
    return False


def _allclose(standin, overload, args, kwargs):
    found = _on_values_if_known(standin, overload, args, kwargs)
    if found is not _FAILED:
        return found
    # Checks written TORCH_CHECK(allclose(...)) (linalg.eig's backward) pass, as on real data. Every
    # op inside torch's composite runs on the device (no fallback to miss); only its answer is made up.
    standin.made_up("aten::allclose", _first_unknown_why(standin, args))
    return True


def _fill(standin, overload, args, kwargs):
    out = standin.compute(overload, args, kwargs)
    if not has_values(out):
        set_constant(out, 0 if op_name(overload) == "aten::zero_" else _value_of(args[1]), unknown_why(out))
    return out


def _reduce_all_any(standin, overload, args, kwargs):
    out = standin.compute(overload, args, kwargs)
    if has_values(out):
        return out
    value = constant_of(args[0])
    if value is not None and len(args) == 1:  # the whole tensor: known when its values are
        set_constant(out, (value != 0) if args[0].numel() else op_name(overload).startswith("aten::all"),
                     unknown_why(out))
    return out


def _exact_match(standin, overload, args, kwargs):
    out = standin.compute(overload, args, kwargs)
    if has_values(out):
        return out
    known = constant_of(args[0])
    other = _value_of(args[1]) if known is not None and op_name(overload).startswith("aten::eq.") else None
    set_constant(out, (known == other) if other is not None else None, unknown_why(out))
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
    # The CPU kernel's gradient strides, as the device's (newer torch's Meta kernel lays the weight's
    # gradient out otherwise, and AccumulateGrad would then copy it to the weight's layout)
    return standin.with_cpu_layout(*call)


_SPECIAL = {
    "aten::empty.memory_format": _empty,
    "aten::empty_strided": _empty,
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
@functools.lru_cache(maxsize=None)
def _written_arguments(overload) -> tuple:
    """(position, name) of the arguments an op writes (``self`` of an in-place op, ``out=``)."""
    return tuple((index, argument.name) for index, argument in enumerate(overload._schema.arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write)


def _as_fallback_hands_it(tensor: torch.Tensor, copies: list) -> torch.Tensor:
    """A device tensor's values as the CPU fallback hands them to a kernel (see ``StandIn._on_values``);
    a copy is listed in ``copies`` with its device tensor."""
    view = cpu_view(tensor)
    if view.is_contiguous() or _dense(view):
        return view
    with torch._C._DisableTorchDispatch():
        copy = view.clone()  # preserve_format: contiguous (or channels-last) where not dense, as .to("cpu")
    copies.append((copy, tensor))
    return copy


def _dense(tensor: torch.Tensor) -> bool:
    """Whether a tensor's elements fill its span of memory exactly once, in some order (torch's
    non-overlapping-and-dense, which decides the strides ``.to()`` and ``clone()`` keep)."""
    expected = 1
    for stride, size in sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride()) if size != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _copy_back_written(overload, args, kwargs, copies: list) -> None:
    """What a kernel wrote into copies of non-dense device tensors, copied back into their values
    (a copy the kernel resized became the tensor's values already)."""
    written = {id(t) for t in _flat_tensors(_written(overload, args, kwargs), [])}
    for copy, original in copies:
        if id(original) in written and tuple(copy.shape) == tuple(original.shape):
            with torch._C._DisableTorchDispatch():
                cpu_view(original).copy_(copy)


def _written(overload, args, kwargs) -> list:
    """The arguments an op writes."""
    return [kwargs.get(key) if key in kwargs else (args[index] if index < len(args) else None)
            for index, key in _written_arguments(overload)]


def _forget_written(overload, args, kwargs, out, why: str) -> None:
    """An op ran without values: its outputs and the tensors it wrote have none, ``why``."""
    for tensor in _flat_tensors((out, _written(overload, args, kwargs)), []):
        if tensor.device.type not in ("cpu", "meta"):
            forget(tensor, why)


def _remember_values(device_out, cpu_out, store: ValueStore) -> None:
    """The indices a filter found on placeholders (every element passes) as the device outputs' values."""
    if isinstance(device_out, (list, tuple)) and isinstance(cpu_out, (list, tuple)):
        for device_value, cpu_value in zip(device_out, cpu_out):
            _remember_values(device_value, cpu_value, store)
    elif isinstance(device_out, torch.Tensor) and isinstance(cpu_out, torch.Tensor) and \
            device_out.shape == cpu_out.shape and device_out.stride() == cpu_out.stride() and \
            cpu_out.numel() <= _CONSTANT_CHECK_MAX_ELEMENTS:
        store.keep(device_out, cpu_out, budgeted=False)


def _sized_by_data(overload) -> bool:
    """Whether an op's output size depends on its inputs' values (so a placeholder's shape is made up)."""
    return any(getattr(torch.Tag, tag, None) in overload.tags for tag in ("dynamic_output_shape", "data_dependent_output"))


#: Device kernels whose outputs newer torch's Meta kernels lay out otherwise than the CPU kernel the
#: device's results follow (what later calls do depends on it: a view or a copy, a gradient accumulated
#: in place or copied to the parameter's layout).
_CPU_LAYOUT = frozenset({"aten::native_layer_norm_backward"})
#: Composite ops whose whole answer is a value read from the device: answered here, in one call,
#: instead of by torch's composite reading placeholder values.
_ANSWERED = {"aten::allclose": _allclose}
