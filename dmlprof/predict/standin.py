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

Its parts, each a module of :mod:`dmlprof.predict`: the tensors without
memory (``husks``), what an op's schema says of its arguments (``arguments``),
the values made up where none are known (``placeholders``), a kernel run on
the meta device or the CPU and its results brought back (``conversion``), the
cache of Meta kernels' answers (``shape_cache``), the kernels that do more than
compute shapes (``special_kernels``) and torch-directml's own reshape
(``reshape``). This module holds what ties them together: where the stand-in
registers a kernel, and which of those paths each op's kernel takes.
"""
from __future__ import annotations

import functools
import time
import warnings
from collections import Counter
from typing import NamedTuple, Optional

import torch

from dmlprof.directml.device_module import CONTIGUOUS_OP, contiguous_as_on_directml
from dmlprof.directml.failures import (
    ABORTS, ALWAYS_FAILING_COMPOSITES, IMPLICIT_FAILING_COMPOSITES, UNHELD_DTYPES, DirectMLFailure, failure, may_fail,
    unheld_dtype_failure,
)
from dmlprof.directml.float64 import FLOAT64_MESSAGE, refuses_float64
from dmlprof.directml.mixed_devices import indexless_failure, mixed_device_failure
from dmlprof.predict import checkpoints, values as _values
from dmlprof.predict.abort_note import note_abort
from dmlprof.predict.arguments import (
    elements, flat_tensors, read_arguments, run_sizing_outs_after, tensor_slots, unmarked_written, view_sources,
    written_only,
)
from dmlprof.predict.conversion import (
    FAILED, Converted, a_copy_of, as_fallback_hands_it, copy_back_written, forget_written, given_values, rewrapped,
)
from dmlprof.predict.husks import META_KEYS, meta_copy, refuse
from dmlprof.predict.placeholders import FINDS_INDICES, SIZED_BY_DATA, placeholder, remember_values, sized_by_data
from dmlprof.predict.reshape import directml_reshape
from dmlprof.predict.references import META_REFERENCES, VALUE_REFERENCES
from dmlprof.predict.rnn_cells import UNFUSED_PATHS
from dmlprof.predict.shape_cache import cache_key, cache_kind, cached, remember
from dmlprof.predict.special_kernels import ANSWERED, CPU_LAYOUT, DIRECTML_DTYPES, SPECIAL
from dmlprof.predict.values import (
    WHY_EMPTY, WHY_META, ValueStore, constant_of, cpu_view, has_values, set_constant, unknown_why,
)
from dmlprof.record.frame import op_name
from dmlprof.record.tap import PerOpKernels

_EXPLICIT_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd")
_IMPLICIT_KEY = "CompositeImplicitAutograd"
#: torch-directml registers these too, but torch's composite kernels make the same aliases in C++:
#: routed through Python, ``nn.Parameter(t)`` would find a Python object on the alias and refuse it.
_LEFT_TO_TORCH = frozenset({"aten::alias", "aten::detach"})
#: The device copies ATen calls on a backend it has no copy of its own for (``copy_impl``): a conjugate or
#: negative view reaching one would meet the Conjugate/Negative fallback, which resolves the view with
#: clone -> copy_ -> the same device copy, for ever (a stack overflow: a complex ``x.conj().clone()``
#: ended the process). A device with its own copy (XPU's, MPS's copy_stub) copies such a view in one
#: call; here the stand-in's copy gets the view with its bits, as the CPU copy it runs reads them.
_COPIES_READING_LAZY_BITS = frozenset({"aten::_copy_from", "aten::_copy_from_and_resize"})
_BELOW_LAZY_BITS = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Conjugate)
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
        self.float64_support = float64_support
        self.refused = self.refused_dtypes(float64_support)
        #: the ops sent to the CPU, in call order (the predicted session's evidence)
        self.log = log
        self.device_type = device_type
        self.placeholder_ops: Counter = Counter()
        self._natives = frozenset(table.registrations.get("PrivateUse1", ())) - _LEFT_TO_TORCH
        # torch-directml's autograd-key kernels, and contiguous() as its tensors answer it (they say they are
        # contiguous in every layout: dmlprof.directml.device_module.contiguous_as_on_directml)
        autograd = frozenset(table.registrations.get("AutogradPrivateUse1", ())) | {CONTIGUOUS_OP} | \
            IMPLICIT_FAILING_COMPOSITES | self.unfused | self.judged_composites
        self._kernels = PerOpKernels("PrivateUse1", self._kernel_for, wanted=self._wanted)
        self._autograd = PerOpKernels("AutogradPrivateUse1", self._autograd_kernel_for,
                                      wanted=lambda name: name in autograd)
        self._lazy_bits = [PerOpKernels(key, _past_lazy_bits, wanted=lambda name: name in _COPIES_READING_LAZY_BITS)
                           for key in ("Conjugate", "Negative")]

    #: composites torch-directml refuses though torch's generic kernel would run them
    always_failing = ALWAYS_FAILING_COMPOSITES
    #: fused ops ATen calls on a PrivateUse1 device where the device predicted takes their unfused path
    #: (``UNFUSED_PATHS``: MPS's GRU cell); torch-directml's device is a PrivateUse1 one and takes the fused call
    unfused = frozenset()
    #: composites the device predicted judges by their arguments before they decompose (``judge_composite``)
    judged_composites = frozenset()
    #: kernels whose outputs' dtypes are the device's own, not the CPU's (torch-directml's dropout mask)
    own_dtypes = DIRECTML_DTYPES
    #: the device's tensors have no storage to read from Python (torch-directml's: an OpaqueTensorImpl)
    storage_less = True
    #: ``copy.deepcopy`` keeps views of one base as views of one copy (a device with storage: XPU's); torch-directml's
    #: tensors are cloned one by one (measured on realdml: views split)
    deepcopy_keeps_views = False
    #: the device with storage the stand-in predicts ("xpu", "mps"), whose tensors torch pickles by storage; None:
    #: torch-directml's
    target_type = None

    def refused_dtypes(self, float64_support: bool) -> dict:
        """``{dtype: () -> exception}``: tensors of these dtypes cannot be made on the device."""
        # most DirectML adapters have no float64 (a setting); a bfloat16 or complex tensor ends the process
        refused = {dtype: (lambda dtype=dtype: DirectMLFailure(unheld_dtype_failure(dtype))) for dtype in UNHELD_DTYPES}
        # float64 is not refused here: an adapter without it refuses where DirectML computes on it (checked)
        return refused

    def checked(self, run, name: str):
        """``run``, raising first where the device refuses the call (DirectML's measured refusals)."""
        if may_fail(name):
            run = _failing_as_on_directml(run, name, self.device_type, self.float64_support)
        if not self.float64_support:
            run = _refusing_float64(run, name, self.device_type)
        return run

    # -- registration ---------------------------------------------------------------
    def install(self) -> None:
        refuse(self.refused)
        _values.install(self.values)
        checkpoints.install(self.device_type, storage_less=self.storage_less, keeps_views=self.deepcopy_keeps_views,
                            target_type=self.target_type)
        with warnings.catch_warnings():
            # Where a real PrivateUse1 backend is loaded (the emulated device in tests), ours
            # override its kernels for as long as they are installed; torch warns about each.
            warnings.simplefilter("ignore")
            self._kernels.install()
            self._autograd.install()
            for kernels in self._lazy_bits:
                kernels.install()

    def refresh(self) -> None:
        """Kernels for ops defined since install (an extension imported by the model)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._kernels.refresh()
            self._autograd.refresh()

    def remove(self) -> None:
        self._kernels.remove()
        self._autograd.remove()
        for kernels in self._lazy_bits:
            kernels.remove()
        refuse({})
        _values.install(None)
        checkpoints.remove()

    def _wanted(self, name: str) -> bool:
        if name in self._natives or name in ANSWERED or name in self.always_failing or name in self.unfused:
            return True
        if name in _LEFT_TO_TORCH or is_composite(name) or _has_kernel(name, "PrivateUse1"):
            return False  # torch's generic kernel runs it, or torch registered one of its own (c10d)
        return True  # no kernel of torch-directml's, none of torch's: the boxed fallback

    def _kernel_for(self, overload):
        name = op_name(overload)
        slots = tensor_slots(overload)
        kernel = self._kernel_for_unwrapped(overload, name)
        if slots:
            store = self.values
            return lambda keyset, *args, **kwargs: kernel(keyset, *rewrapped(args, slots, store), **kwargs)
        return kernel

    def _kernel_for_unwrapped(self, overload, name: str):
        if name in ANSWERED:
            answer = ANSWERED[name]
            run = lambda args, kwargs: answer(self, overload, args, kwargs)  # noqa: E731
        elif name in self.unfused:  # below autograd (inference mode): the pieces run as the device's calls
            unfused = UNFUSED_PATHS[name]
            return lambda keyset, *args, **kwargs: unfused(*args, **kwargs)
        elif name not in self._natives:
            run = lambda args, kwargs: self.fallback(overload, name, args, kwargs)  # noqa: E731
        elif name in SPECIAL or name in self.own_dtypes:
            special = self.own_dtypes.get(name) or SPECIAL[name]
            run = lambda args, kwargs: special(self, overload, args, kwargs)  # noqa: E731
        elif view_sources(overload):
            run = lambda args, kwargs: self.view(overload, args, kwargs)  # noqa: E731
        elif name in CPU_LAYOUT:
            run = lambda args, kwargs: self.with_cpu_layout(overload, args, kwargs)  # noqa: E731
        else:
            run = lambda args, kwargs: self.compute(overload, args, kwargs)  # noqa: E731
        run = self.checked(run, name)  # calls the device refuses fail here as there
        run = self.devices_checked(run, overload, name)  # first: a CPU argument is the cause, not what it meets
        return lambda keyset, *args, **kwargs: run(args, kwargs)

    def devices_checked(self, run, overload, name: str):
        """``run``, refusing first a CPU tensor beside device tensors, or an index-less device tensor beside an
        indexed one, where torch-directml's kernel does (dmlprof.directml.mixed_devices, measured)."""
        schema, device_type, native = overload._schema, self.device_type, name in self._natives

        def kernel(args, kwargs):
            found = mixed_device_failure(name, schema, args, kwargs, device_type, native)
            if found is not None:
                if found.kind == ABORTS:
                    note_abort(name, found.error_text())
                raise DirectMLFailure(found)
            indexless = indexless_failure(name, schema, args, kwargs, device_type)
            if indexless is not None:
                raise RuntimeError(indexless)
            return run(args, kwargs)
        return kernel

    def _autograd_kernel_for(self, overload):
        # torch-directml's own autograd-key kernels: reshape does what torch's composite does, through
        # the dispatcher, so autograd records the views and copies it makes; torchvision::nms (no
        # gradient) runs the device's kernel below autograd, where a recorder sees it as any device op.
        if op_name(overload) == "aten::reshape":
            return lambda keyset, *args, **kwargs: directml_reshape(*args, **kwargs)
        if op_name(overload) == CONTIGUOUS_OP:
            return lambda keyset, *args, **kwargs: contiguous_as_on_directml(*args, **kwargs)
        if op_name(overload) in self.unfused:  # above autograd: autograd records (and differentiates) the pieces
            unfused = UNFUSED_PATHS[op_name(overload)]
            return lambda keyset, *args, **kwargs: unfused(*args, **kwargs)
        if op_name(overload) in self.judged_composites:
            name = op_name(overload)
            return lambda keyset, *args, **kwargs: self.judge_composite(name, args, kwargs) or \
                overload.decompose(*args, **kwargs)
        if op_name(overload).startswith("aten::") and op_name(overload) not in IMPLICIT_FAILING_COMPOSITES:
            return lambda keyset, *args, **kwargs: overload.decompose(*args, **kwargs)
        below = torch._C._after_autograd_keyset
        return lambda keyset, *args, **kwargs: overload.redispatch(keyset & below, *args, **kwargs)

    def judge_composite(self, name: str, args, kwargs) -> None:
        """Raises where the device refuses a call of ``name`` (one of ``judged_composites``) with these arguments."""

    # -- kernels ------------------------------------------------------------------------
    def fallback(self, overload, name: str, args, kwargs):
        """torch-directml's boxed fallback: logged, then the CPU kernel's outputs (shapes only)."""
        self.log.append(name)
        if not cpu_can_run(name):
            raise NotImplementedError(
                f"Could not run '{name}' with arguments from the 'CPU' backend. This could be because the operator "
                "doesn't exist for this backend (predicted: torch-directml's CPU fallback has no kernel to run)")
        if cache_kind(overload) == "inplace":  # what it returns is its arguments: nothing to learn
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
            return overload.redispatch(META_KEYS, *args, **kwargs)
        except Exception:  # no generic kernel for this view: its geometry, on fresh storage
            return self.compute(overload, args, kwargs)

    def with_cpu_layout(self, overload, args, kwargs):
        """Outputs laid out as the CPU kernel lays them out: on values, else on placeholders where small enough."""
        why = self.why_no_values(args, kwargs, overload)
        if why is not None and elements(args) + elements(kwargs.values()) <= CPU_SHAPES_MAX_ELEMENTS:
            found = self._on_placeholders(overload, args, kwargs, why, SIZED_BY_DATA.get(op_name(overload)))
            if found is not FAILED:
                return found
        return self.compute(overload, args, kwargs)

    def compute(self, overload, args, kwargs):
        """Outputs with values from the CPU kernel where every device argument has values; else shapes only."""
        why = self.why_no_values(args, kwargs, overload)
        if why is _CONSTANT_STAYS:
            found = self._folded(overload, args, kwargs)
            if found is not FAILED:
                return found
            why = None if all(self.values.materialize(t) is None for t in flat_tensors(
                read_arguments(overload, args, kwargs), []) if t.device.type == self.device_type) else why
        if why is None:
            found = self.on_values(overload, args, kwargs)
            if found is not FAILED:
                return found
            why = f"{op_name(overload)} did not run on the CPU"
        return self.shapes_only(overload, args, kwargs, why)

    def shapes_only(self, overload, args, kwargs, why: str):
        """Outputs from the Meta kernel, else from the CPU kernel on placeholder values; none has values."""
        try:
            out = self._on_meta(overload, args, kwargs)
        except Exception as exc:  # no Meta kernel, or the output depends on the data
            name = op_name(overload)
            out = self._on_placeholders(overload, args, kwargs, why, SIZED_BY_DATA.get(name, placeholder),
                                        values_made_up=name in FINDS_INDICES)
            if out is FAILED:
                raise exc
            return out
        forget_written(overload, args, kwargs, out, why, self.kept_unmarked_writes(overload, args, kwargs))
        return out

    def why_no_values(self, args, kwargs, overload) -> Optional[str]:
        """Why an op on these arguments is not computed on values (a sentence), or None where it is.

        A tensor the op only writes (``out=``, the tensor a random op fills) gets values when it runs
        (``on_values``). A tensor that holds a known constant gets values once every other one has some;
        one ``torch.empty`` made and nothing wrote holds nothing worth reading.
        """
        tensors = flat_tensors(read_arguments(overload, args, kwargs), [])
        if any(tensor.device.type == "meta" for tensor in tensors):
            return WHY_META
        device_tensors = [t for t in tensors if t.device.type == self.device_type]
        lacking = [tensor for tensor in device_tensors if not has_values(tensor)]
        # a tensor fresh from torch.empty that an op overwrites whole (``empty_like(p).scatter_(0, p, arange)``, every
        # packed sequence's inverse permutation): what it held does not matter (taken as unknown, every later call of
        # a packed-sequence model was a guess); one written in part still holds arbitrary bytes where it was not
        overwritten = _overwritten_whole(overload, args)
        for tensor in lacking:
            if constant_of(tensor) is None and not (tensor is overwritten and unknown_why(tensor) == WHY_EMPTY):
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
            converted = Converted(self.device_type, _one_element, "cpu")
            value = overload(*converted.convert(args), **converted.convert_kwargs(kwargs))
        except Exception:
            return FAILED
        values = value if isinstance(value, (list, tuple)) else (value,)
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if len(values) != len(outs) or not all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in values):
            return FAILED
        for device_out, cpu_value in zip(outs, values):
            set_constant(device_out, cpu_value.item(), _CONSTANT_STAYS)
        return out

    def made_up(self, name: str, why: str) -> None:
        """``name`` made a value up (a read, a shape, a comparison) because an input had none, ``why``."""
        self.placeholder_ops[name] += 1
        if self.first_guess is None:
            self.first_guess = Guess(time.perf_counter_ns(), name, why)

    def _on_meta(self, overload, args, kwargs):
        key = cache_key(overload, args, kwargs)
        found = cached(key, args, kwargs)
        if found is not None:
            return found
        converted = Converted(self.device_type, meta_copy, "meta")
        meta_args = converted.convert(args)
        meta_kwargs = converted.convert_kwargs(kwargs)
        # a device-only op without a Meta kernel (the GRU's fused cell, which XPU runs) is shaped by its reference
        shaped_by = META_REFERENCES.get(op_name(overload), overload)
        out = converted.back(shaped_by(*meta_args, **meta_kwargs))
        remember(key, out, args, kwargs, converted.target)
        return out

    def on_values(self, overload, args, kwargs):
        """The CPU kernel on the device tensors' values: what it writes and returns is the device's.

        Its arguments are what torch's CPU fallback (the emulated device's kernels) hands the CPU kernel:
        a tensor as ``.to("cpu")`` copies it, in its own strides where it is dense, contiguous where it
        is not (a slice with gaps); a reduction's order, and so its last bits, follows the strides, and
        a branch on a value at a threshold follows those. A dense tensor is its values themselves, so
        what the kernel writes into it is kept; a copy is copied back.
        """
        for tensor in flat_tensors(written_only(overload, args, kwargs), []):
            if tensor.device.type == self.device_type and not given_values(self.values, tensor):
                return FAILED  # written only in part, where the rest of its storage is unknown
        copies: list = []
        kept = self.kept_unmarked_writes(overload, args, kwargs)
        lost = {id(t) for t in self.unmarked_writes(overload, args, kwargs)} - {id(t) for t in kept}
        converted = Converted(self.device_type, lambda tensor: a_copy_of(tensor) if id(tensor) in lost else
                              as_fallback_hands_it(tensor, copies), "cpu", self.values)
        cpu_args = converted.convert(args)
        cpu_kwargs = converted.convert_kwargs(kwargs)
        started = time.perf_counter()
        try:
            out = run_sizing_outs_after(VALUE_REFERENCES.get(op_name(overload), overload), cpu_args, cpu_kwargs)
        except Exception:
            return FAILED
        finally:
            self.values.timed(started)
        device_out = converted.back(out)
        if copies:
            copy_back_written(overload, args, kwargs, copies, kept)
        return device_out

    def unmarked_writes(self, overload, args, kwargs) -> tuple:
        """The device tensors the op's CPU kernel writes though its schema does not mark them (BatchNorm's running
        statistics: :mod:`dmlprof.directml.unmarked_writes`)."""
        return tuple(t for t in flat_tensors(unmarked_written(overload, args, kwargs), [])
                     if t.device.type == self.device_type)

    def kept_unmarked_writes(self, overload, args, kwargs) -> tuple:
        """Those of ``unmarked_writes`` the device keeps: a kernel of its own writes them, its CPU fallback hands the
        CPU kernel copies it never copies back (measured on realdml)."""
        if op_name(overload) not in self._natives:
            return ()
        return self.unmarked_writes(overload, args, kwargs)

    def _on_placeholders(self, overload, args, kwargs, why: str, make=None, values_made_up: bool = False):
        """The CPU kernel on placeholder values, for its outputs' shapes and strides; none keeps values
        (but the indices a filter found on placeholders, ``values_made_up``). An output sized by the
        data is made up."""
        converted = Converted(self.device_type, make or placeholder, "cpu")
        cpu_args = converted.convert(args)
        cpu_kwargs = converted.convert_kwargs(kwargs)
        try:
            out = run_sizing_outs_after(overload, cpu_args, cpu_kwargs)
        except Exception:
            return FAILED
        device_out = converted.back(out)
        forget_written(overload, args, kwargs, device_out, why, self.kept_unmarked_writes(overload, args, kwargs))
        name = op_name(overload)
        if name in SIZED_BY_DATA or sized_by_data(overload):
            self.made_up(name, why)
        if values_made_up:
            remember_values(device_out, out, self.values)
        return device_out


_POINTWISE = getattr(torch.Tag, "pointwise", None)
#: why a pointwise op on constants is not computed on values: its outputs hold a constant (``_folded``)
_CONSTANT_STAYS = "a constant, computed once (pointwise on constants)"


#: ops writing ``self`` (``args[0]``) by an index along ``args[1]`` whatever it held (scatter_add_'s depend on it: not
#: here), with the out= forms an in-place call reaches where the device has only those (torch-directml's scatter_):
#: whether the index (``args[2]``) names every element is read from its values
_WRITE_BY_INDEX = frozenset(f"aten::{name}" for name in (
    "scatter_.src", "scatter_.value", "scatter.src_out", "scatter.value_out", "index_copy_", "index_copy.out"))


def _overwritten_whole(overload, args):
    """The tensor an op writes in place, where it writes every element of it whatever it held; else None. Known
    for a scatter whose index has ``self``'s shape and holds each position of every line along ``dim``, and an
    index_copy whose index names every slice (the index's values on the host: the prediction's, or a CPU index)."""
    if op_name(overload) not in _WRITE_BY_INDEX or len(args) < 3 or not isinstance(args[2], torch.Tensor):
        return None
    target, dim, index = args[0], args[1], args[2]
    if not isinstance(target, torch.Tensor) or not isinstance(dim, int) or target.dim() == 0:
        return None
    if index.device.type != "cpu":
        if not has_values(index):
            return None
        index = cpu_view(index)
    dim = dim % target.dim()
    with torch._C._DisableTorchDispatch():
        positions = torch.arange(target.size(dim))
        if op_name(overload).startswith("aten::scatter"):
            if tuple(index.shape) != tuple(target.shape):
                return None
            shape = [1] * index.dim()
            shape[dim] = -1
            whole = bool((index.sort(dim=dim).values == positions.view(shape)).all())
        else:
            whole = index.dim() <= 1 and index.numel() == target.size(dim) and \
                bool((index.reshape(-1).sort().values == positions).all())
    return target if whole else None


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


def _past_lazy_bits(overload):
    """A device copy called on a conjugate or negative view, sent on to the stand-in's copy with the view's
    bits (``_COPIES_READING_LAZY_BITS``)."""
    return lambda keyset, *args, **kwargs: overload.redispatch(keyset & _BELOW_LAZY_BITS, *args, **kwargs)


def _refusing_float64(run, name: str, device_type: str):
    """``run``, refusing a float64 device tensor where DirectML computes on one (its arguments before, its
    outputs after: a factory's ``dtype=``), as an adapter without float64 does (dmlprof.directml.float64)."""
    def kernel(args, kwargs):
        if refuses_float64(name, (args, tuple(kwargs.values())), device_type):
            raise RuntimeError(FLOAT64_MESSAGE)
        result = run(args, kwargs)
        if refuses_float64(name, (result,), device_type, outputs=True):
            raise RuntimeError(FLOAT64_MESSAGE)
        return result
    return kernel


def _failing_as_on_directml(run, name: str, device_type: str, float64: bool):
    """The kernel ``run``, raising first where DirectML refuses the call (its measured refusals)."""
    def checked(args, kwargs):
        found = failure(name, args, kwargs, device_type, float64)
        if found is not None:
            if found.kind == ABORTS:  # noted, recorded or not: code that catches it where nothing records is still seen
                note_abort(name, found.error_text())
            raise DirectMLFailure(found)
        return run(args, kwargs)
    return checked
