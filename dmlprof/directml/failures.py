"""Calls that fail on DirectML: torch-directml raises, or ends the process, where the CPU runs them.

Measured on the real torch-directml 0.2.5 (tools/realdml/measure_truth.py, docs/realdml.md) and
written here as rules over a call's arguments, so that every DirectML path says the same:

- the live recorder on real DirectML refuses a call that would **abort** the process (a fatal
  check in torch-directml's native code, SIGABRT or SIGSEGV): the scan stops there with an error
  and keeps everything recorded, instead of dying with nothing (:meth:`DmlBackend.refusal_for`);
- the prediction (``--target dml``) and the emulated device raise where torch-directml raises or
  aborts, with its own words (an abort is said as such), so a model that fails on DirectML fails
  at the same call on every path.

Each rule is a condition measured on the real thing, not a guess: a call either matches a rule
(it fails on DirectML) or DirectML runs it. A complex or bfloat16 tensor on the device ends the process
where it is made (an abort; the stand-in and the emulated device refuse those dtypes themselves); float64,
on an adapter without it, is refused where DirectML computes on it (dmlprof.directml.float64).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch

from dmlprof.directml.float64 import FLOAT64_MESSAGE  # noqa: F401 (said here too, as before)
from dmlprof.directml.call_rules import (
    DEVICE_MAX_DIMS, EXTRA_UNHELD_DTYPES, INVALID_ARGUMENT, MANY_DIMS, SCATTER_ADDS, SCATTERS, SIZED_FACTORIES,
    TOO_LARGE, ClassRule, rules_by_op, too_large, too_many_dims,
)

RAISES = "raises"
ABORTS = "aborts"

#: torch-directml's fatal check for a tensor of a dtype it cannot hold (dml_util.cc), glog's words
COMPLEX_MESSAGE = "Invalid or unsupported data type {dtype}."
#: how every abort is said: the call that would end the process fails with this prefix instead
ABORT_PREFIX = "torch-directml ends the process here"
_ABORT_TEXT = re.compile(re.escape(ABORT_PREFIX) + r" \((?P<how>[^)]*)\): (?P<message>[^\n]*)")


@dataclass(frozen=True)
class Failure:
    """A call DirectML does not run: torch-directml's words, and whether it raises or aborts."""

    kind: str  # RAISES or ABORTS
    message: str  # what torch-directml says (the exception's text, or the fatal check's line)
    how: str = ""  # for an abort: the signal that ends the process

    def error_text(self) -> str:
        """The exception text a stand-in (or the guard on real DirectML) raises in the call's place."""
        if self.kind == ABORTS:
            return f"{ABORT_PREFIX} ({self.how}): {self.message}".rstrip(": ")
        return self.message


class DirectMLFailure(RuntimeError):
    """Raised in place of a call that fails on DirectML (a stand-in's, or the guard's for an abort)."""

    def __init__(self, failure: Failure):
        super().__init__(failure.error_text())
        self.failure = failure


#: dtypes no DirectML tensor can hold, in torch-directml's words: making one on the device ends the process
#: (a fatal check in dml_util.cc, SIGABRT), measured for each on the real torch-directml
UNHELD_DTYPES = {torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble", torch.complex32: "ComplexHalf",
                 torch.bfloat16: "BFloat16", **EXTRA_UNHELD_DTYPES}


def unheld_dtype_failure(dtype: torch.dtype) -> Failure:
    """A tensor of a dtype DirectML cannot hold, made on the device: the fatal check ends the process."""
    return Failure(ABORTS, COMPLEX_MESSAGE.format(dtype=UNHELD_DTYPES.get(dtype, str(dtype))), "SIGABRT")



# -- the rules: op name -> check(args, kwargs) -> Failure or None --------------------------------
_SCATTER_MESSAGE = ("DirectML scatter doesn't allow partially modified dimensions. Please update the dimension "
                    "so that the indices and input only differ in the provided dimension.")


def _scatter(args, kwargs) -> Optional[Failure]:
    """DirectML's scatter compares every dimension but ``dim`` of index and self, with ``dim`` as
    given: a negative ``dim`` (``one_hot``'s ``scatter_(-1, ...)``, ``topk``/``max(dim=-1)``'s backward)
    matches no dimension, so an index narrower than self in the scattered dimension is refused too."""
    self, dim, index = args[0], args[1], args[2] if len(args) > 2 else kwargs.get("index")
    if not isinstance(index, torch.Tensor) or not isinstance(self, torch.Tensor) or index.dim() != self.dim():
        return None
    if any(d != dim and index.shape[d] != self.shape[d] for d in range(self.dim())):
        return Failure(RAISES, _SCATTER_MESSAGE)
    return None


def _non_empty_output(args, kwargs) -> bool:
    sizes = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    return all(size > 0 for size in sizes) if sizes else True


def _eye(args, kwargs) -> Optional[Failure]:
    """``torch.eye(n, device=dml)``: the fallback's ``eye.m_out`` crashes the process for any n > 0."""
    return Failure(ABORTS, "eye on the device (eye.m_out's CPU fallback) crashes", "SIGSEGV") \
        if _non_empty_output(args, kwargs) else None




def _is_float(value) -> bool:
    return isinstance(value, float)


def _full(args, kwargs) -> Optional[Failure]:
    """``torch.full(size, 1.5, device=dml)``: with no dtype given, torch-directml's full makes the fill
    value's double on the device (an int fill, or an explicit dtype, runs; so does full_like)."""
    fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
    return Failure(RAISES, FLOAT64_MESSAGE) if kwargs.get("dtype") is None and _is_float(fill) else None


def _rsub_scalar(args, kwargs) -> Optional[Failure]:
    """``1.0 - x``: torch-directml's rsub puts a float scalar on the device as a double (``1 - x`` runs)."""
    other = args[1] if len(args) > 1 else kwargs.get("other")
    return Failure(RAISES, FLOAT64_MESSAGE) if _is_float(other) else None


def _always_aborts(what: str) -> Callable:
    def check(args, kwargs) -> Optional[Failure]:
        return Failure(ABORTS, what, "SIGSEGV")
    return check




def _kthvalue(args, kwargs) -> Optional[Failure]:
    """kthvalue on the device crashes (SIGSEGV) for an input of 2+ dims (float32, int64, float16) and for float16
    of any shape; a 1-D float32 or int64 input runs, through the CPU fallback (measured on realdml, as median's
    class). A 0-d input was not measured: still refused."""
    self = args[0] if args else kwargs.get("self")
    if isinstance(self, torch.Tensor) and self.dim() == 1 and self.dtype != torch.float16:
        return None
    return Failure(ABORTS, "kthvalue on the device crashes (an input of 2 or more dimensions, or float16)", "SIGSEGV")


def _scatter_add(args, kwargs) -> Optional[Failure]:
    """scatter_add: DirectML's scatter rules, and an index longer than self along ``dim`` (which torch
    allows) is an invalid argument to DirectML."""
    refused = _scatter(args, kwargs)
    if refused is not None:
        return refused
    self, dim, index = args[0], args[1], args[2] if len(args) > 2 else kwargs.get("index")
    if isinstance(self, torch.Tensor) and isinstance(index, torch.Tensor) and index.dim() == self.dim() > 0 \
            and index.shape[dim] > self.shape[dim]:
        return Failure(RAISES, INVALID_ARGUMENT)
    return None
#: rules that hold only on an adapter without float64 (most integrated GPUs): on one with it, the call runs
WITHOUT_FLOAT64_RULES: dict = {
    **dict.fromkeys(("aten::full", "aten::full.names", "aten::full.out", "aten::full.names_out"), _full),
    **dict.fromkeys(("aten::rsub.Scalar", "aten::rsub.Scalar_out"), _rsub_scalar),
}
def _overloads(*names: str) -> tuple:
    """Each op name with its ``.out`` overload (the op frame names both; a stand-in's kernel gets either)."""
    return tuple(n for name in names for n in (name, f"{name}.out"))


#: torch-directml's words where DirectML cannot even build the operator
CREATE_OPERATOR = "m_device->CreateOperator(&opDesc, IID_PPV_ARGS(&op))"


def _device_inputs(args, kwargs) -> list:
    return [t for t in _flat_tensors((args, tuple(v for k, v in kwargs.items() if k != "out")))]


def _flat_tensors(values) -> list:
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found += _flat_tensors(value)
    return found


def _refuses(condition: Callable, message: str) -> Callable:
    def check(args, kwargs) -> Optional[Failure]:
        return Failure(RAISES, message) if condition(args, kwargs) else None
    return check


def _any_empty(args, kwargs) -> bool:
    return any(t.numel() == 0 for t in _device_inputs(args, kwargs))


def _integer_input(args, kwargs) -> bool:
    """A non-empty integer or bool first input (an empty one runs: measured)."""
    first = next(iter(_device_inputs(args, kwargs)), None)
    return first is not None and first.numel() > 0 and not (first.is_floating_point() or first.is_complex())


def _zero_dim_self(args, kwargs) -> bool:
    self = args[0] if args else kwargs.get("self")
    return isinstance(self, torch.Tensor) and self.dim() == 0


def _cat_with_an_empty_piece(args, kwargs) -> bool:
    """An empty piece beside pieces with elements: torch skips empty 1-D pieces itself (a legacy rule), and a cat of
    empty pieces only runs; DirectML refuses the rest."""
    pieces = [t for t in (args[0] if args else kwargs.get("tensors", ())) if isinstance(t, torch.Tensor)]
    return any(t.numel() == 0 and t.dim() > 1 for t in pieces) and any(t.numel() for t in pieces)


def _divisor_override(args, kwargs) -> bool:
    """avg_pool2d/3d(..., divisor_override): the last positional argument, or the keyword."""
    value = kwargs.get("divisor_override", args[6] if len(args) > 6 else None)
    return value is not None


def _five_dimensional(args, kwargs) -> bool:
    first = args[0] if args else None
    return isinstance(first, torch.Tensor) and first.dim() == 5


def _avg_pool(args, kwargs) -> Optional[Failure]:
    """DirectML's average pooling: floating inputs only, and no divisor_override."""
    if _integer_input(args, kwargs):
        return Failure(RAISES, INVALID_ARGUMENT)
    return Failure(RAISES, "Divisor override isn't supported for DirectML.") if _divisor_override(args, kwargs) else None


def _convolution(args, kwargs) -> Optional[Failure]:
    """DirectML's convolution: 2-D and 1-D only (a 5-D input, conv3d, is refused) and floating inputs only."""
    if _five_dimensional(args, kwargs):
        return Failure(RAISES, "input must be 4-dimensional")
    return Failure(RAISES, INVALID_ARGUMENT) if _integer_input(args, kwargs) else None


def _empty_pooling_input(args, kwargs) -> bool:
    first = args[0] if args else None
    return isinstance(first, torch.Tensor) and first.numel() == 0


#: measured on the real torch-directml: DirectML refuses these as an invalid argument (E_INVALIDARG) or
#: cannot build their operator, for the inputs each condition names
_REFUSED_INPUTS = {
    **dict.fromkeys(_overloads("aten::mm", "aten::addmm", "aten::gather"),
                    _refuses(_any_empty, INVALID_ARGUMENT)),
    **dict.fromkeys(_overloads("aten::reflection_pad1d", "aten::replication_pad1d", "aten::reflection_pad2d",
                               "aten::replication_pad2d"), _refuses(_any_empty, CREATE_OPERATOR)),
    **dict.fromkeys(_overloads("aten::cat"), _refuses(_cat_with_an_empty_piece, INVALID_ARGUMENT)),
    **dict.fromkeys(_overloads("aten::isnan", "aten::isinf", "aten::log2", "aten::log10", "aten::sinc",
                               "aten::threshold"),
                    _refuses(_integer_input, INVALID_ARGUMENT)),
    **dict.fromkeys(_overloads("aten::index_select"), _refuses(_zero_dim_self, INVALID_ARGUMENT)),
    **dict.fromkeys(_overloads("aten::avg_pool2d", "aten::avg_pool3d"), _avg_pool),
    "aten::convolution_overrideable": _convolution,
    **dict.fromkeys(_overloads("aten::_adaptive_avg_pool2d"), _refuses(
        _empty_pooling_input, "adaptive_avg_pooling2d(): expected input to have non-empty spatial dimensions")),
}


_MIXED_PADS = ("torch-dml currently doesn't support a mix of positive and negative padding values, must be all "
               "positive or all negative.")


def _negative_padding(args, kwargs) -> Optional[Failure]:
    """``constant_pad_nd`` as torch-directml takes it (measured): pads of both signs are refused, and a negative
    pad before the second-to-last dimension (cropping its start, as the backward of every ``F.pad`` that pads
    that dimension does) takes a view beyond the tensor's storage; cropping elsewhere runs."""
    pad = list(args[1] if len(args) > 1 else kwargs.get("pad", ()))
    if any(p < 0 for p in pad) and any(p > 0 for p in pad):
        return Failure(RAISES, _MIXED_PADS)
    if len(pad) > 2 and pad[2] < 0:
        # torch-directml's words name the cropped view's sizes and its input's strides (then an offset past them)
        source = args[0] if args else kwargs.get("self")
        sizes = list(source.shape)
        for index, amount in enumerate(pad):
            dim = len(sizes) - 1 - index // 2
            if dim >= 0:
                sizes[dim] += amount
        return Failure(RAISES, f"ensure_in_bounds: sizes {sizes}, strides {list(source.stride())}, storage offset "
                               "past them: cropping the start of the second-to-last dimension takes a view beyond "
                               "the tensor's storage on torch-directml")
    return None


def _cdist_2d(args, kwargs) -> Optional[Failure]:
    """``torch.cdist`` of 2-D inputs (batched 3-D ones run): torch-directml's kernel broadcasts them wrongly and
    raises a size mismatch, or, for two (n, d) inputs with p=2, returns an (n, d) result (a wrong result)."""
    x1, x2 = args[0], args[1]
    p = args[2] if len(args) > 2 else kwargs.get("p", 2.0)
    if not (isinstance(x1, torch.Tensor) and isinstance(x2, torch.Tensor) and x1.dim() == x2.dim() == 2):
        return None
    # two inputs of as many rows run, whatever p (measured: (3, 5) and (3, 5) with p = 0 and 1, (5, 5) with p = 0)
    if x1.shape[0] != x2.shape[0]:
        a, b, dim = x2.shape[0], x1.shape[0], 0
    else:
        return None
    return Failure(RAISES, f"The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton "
                           f"dimension {dim}")


def _as_strided_beyond(args, kwargs) -> Optional[Failure]:
    """``as_strided`` reaching past the device tensor's allocation: torch-directml checks the view against it in its
    own words (measured: a partial view of a moved slice, whose storage on the device is the slice's elements
    alone; the CPU's view of the same slice reads its base and runs). Its message names the geometry, as here."""
    self = args[0] if args else kwargs.get("self")
    size = list(args[1] if len(args) > 1 else kwargs.get("size", ()))
    stride = list(args[2] if len(args) > 2 else kwargs.get("stride", ()))
    offset = args[3] if len(args) > 3 else kwargs.get("storage_offset")
    if not isinstance(self, torch.Tensor) or any(n == 0 for n in size):
        return None
    offset = self.storage_offset() if offset is None else int(offset)
    needed = (offset + 1 + sum((n - 1) * step for n, step in zip(size, stride))) * self.element_size()
    try:
        held = self.untyped_storage().nbytes()
    except NotImplementedError:  # real torch-directml's tensors keep no storage Python can read: it checks this itself
        return None
    if needed <= held:
        return None
    return Failure(RAISES, f"ensure_in_bounds: sizes {size}, strides {stride}, storage offset {offset}, and itemsize "
                           f"{self.element_size()} requiring a storage size of {needed} are out of bounds for storage "
                           f"of size {held}")


def _backward_node(usual: str) -> str:
    """The autograd node running now (autograd names it when it refuses a gradient): the same backward op serves
    several forwards (native_batch_norm and _native_batch_norm_legit), ``usual`` where none is known."""
    current = getattr(torch._C, "_current_autograd_node", None)
    node = current() if current is not None else None
    return node.name() if node is not None else usual


def _cdist_backward(args, kwargs) -> Optional[Failure]:
    """cdist's backward on the device returns ``x1``'s gradient with a unit dimension inserted at 2 ([2, 3, 5] ->
    [2, 3, 1, 5], [5, 5] -> [5, 5, 1]), which autograd refuses: every p measured (0, 0.5, 1, 2, 3, inf; batched and
    2-D inputs, realdml)."""
    x1 = args[1] if len(args) > 1 else kwargs.get("x1")
    if not isinstance(x1, torch.Tensor):
        return None
    shape = list(x1.shape)
    return Failure(RAISES, f"Function {_backward_node('CdistBackward0')} returned an invalid gradient at index 0 - got "
                           f"{shape[:2] + [1] + shape[2:]} but expected shape compatible with {shape}")


def _one_channel_batch_norm_backward(args, kwargs) -> Optional[Failure]:
    """Batch norm's backward on the device for an input of one channel returns the weight's gradient 0-d, which
    autograd refuses (measured on realdml: (2, 1), (4, 1) and (2, 1, 4) inputs, training and eval; (2, 3) and
    (2, 3, 4) run)."""
    source = args[1] if len(args) > 1 else kwargs.get("input")
    mask = args[9] if len(args) > 9 else kwargs.get("output_mask", (True, True, True))
    if not isinstance(source, torch.Tensor) or source.dim() < 2 or source.shape[1] != 1 or not mask[1]:
        return None
    return Failure(RAISES, f"Function {_backward_node('NativeBatchNormBackward0')} returned an invalid gradient at "
                           "index 1 - got [] but expected shape compatible with [1]")


_NEEDS_STORAGE = ("self.has_storage() INTERNAL ASSERT FAILED: as_strided_scatter and the view scatters built on it "
                  "read a tensor's storage, which torch-directml's tensors do not have")


def _needs_storage(args, kwargs) -> Optional[Failure]:
    return Failure(RAISES, _NEEDS_STORAGE)


def _combinations(args, kwargs) -> Optional[Failure]:
    """``torch.combinations`` of a device tensor raises at the ``masked_select`` it ends with, for every input
    measured on realdml (1, 2 and 3 elements; r = 1, 2 and 4; with and without replacement: 22 OpInfo samples of
    three seeds and the table, and probes, each in a fresh process): a single element cannot build DirectML's
    operator, more elements meet an empty mask. No op it is made of fails alone: the same arange, meshgrid, full and
    masked_select, called one by one from Python, run and give the right mask and result (measured), so the class
    is the op. ``r = 0`` and an empty input return before any device op: not refused."""
    self = args[0] if args else kwargs.get("self")
    r = args[1] if len(args) > 1 else kwargs.get("r", 2)
    if not isinstance(self, torch.Tensor) or r < 1 or self.numel() == 0:
        return None
    if self.numel() == 1:
        return Failure(RAISES, CREATE_OPERATOR)
    return Failure(RAISES, f"The size of tensor a ({self.numel()}) must match the size of tensor b (0) at "
                           f"non-singleton dimension {r - 1}")


_COMBINATIONS = frozenset({"aten::combinations"})
#: those of them torch implements for autograd too (CompositeImplicitAutograd): the stand-ins' kernel for them sits
#: on the autograd key as well, else autograd would decompose the call before the device's kernel is reached
IMPLICIT_FAILING_COMPOSITES = _COMBINATIONS
#: composite ops (torch runs them from other ops on any backend) that fail on DirectML tensors though no op they
#: are made of fails alone: the stand-ins give them a kernel of their own that raises
ALWAYS_FAILING_COMPOSITES = frozenset(
    f"aten::{name}{overload}" for name in ("as_strided_scatter", "diagonal_scatter", "select_scatter", "slice_scatter")
    for overload in ("", ".out")) | _COMBINATIONS


RULES: dict = {
    **_REFUSED_INPUTS,
    "aten::_cdist_forward": _cdist_2d,
    "aten::as_strided": _as_strided_beyond,
    "aten::_cdist_backward": _cdist_backward,
    "aten::native_batch_norm_backward": _one_channel_batch_norm_backward,
    **dict.fromkeys(_overloads("aten::constant_pad_nd"), _negative_padding),
    **dict.fromkeys(SCATTERS, _scatter),
    **dict.fromkeys(SCATTER_ADDS, _scatter_add),
    **dict.fromkeys(ALWAYS_FAILING_COMPOSITES - _COMBINATIONS, _needs_storage),
    **dict.fromkeys(_COMBINATIONS, _combinations),
    **dict.fromkeys(("aten::eye", "aten::eye.m", "aten::eye.out", "aten::eye.m_out"), _eye),
    **dict.fromkeys(("aten::kthvalue", "aten::kthvalue.values"), _kthvalue),
    **dict.fromkeys(("aten::linalg_lstsq", "aten::linalg_lstsq.out"),
                    _always_aborts("linalg.lstsq on the device crashes")),
}

def _class_rule(rule: ClassRule) -> Callable:
    def check(args, kwargs) -> Optional[Failure]:
        return Failure(rule.kind, rule.message, rule.how) if rule.check(args, kwargs) else None
    return check


def _first_of(*checks: Callable) -> Callable:
    def check(args, kwargs) -> Optional[Failure]:
        for one in checks:
            found = one(args, kwargs)
            if found is not None:
                return found
        return None
    return check


# the rules keyed by their measured class (dmlprof.directml.call_rules), after any older rule of the same op
for _op, _rules in rules_by_op().items():
    RULES[_op] = _first_of(*([RULES[_op]] if _op in RULES else []), *(_class_rule(r) for r in _rules))

#: the class rules torch-directml checks before it makes a tensor: judged before the dtypes it cannot hold
_BEFORE_DTYPES: dict = {}
for _op, _rules in rules_by_op().items():
    _first = [_class_rule(r) for r in _rules if r.before_dtypes]
    if _first:
        _BEFORE_DTYPES[_op] = _first_of(*_first)

#: ops that make a complex result from real inputs (an FFT of a real signal, ``view_as_complex``):
#: on the device that result ends the process as any complex tensor does
_MAKES_COMPLEX = frozenset({
    "aten::_fft_r2c", "aten::_fft_r2c.out", "aten::view_as_complex", "aten::view_as_complex_copy",
    "aten::complex", "aten::complex.out", "aten::polar", "aten::polar.out", "aten::linalg_eig",
    "aten::linalg_eig.out", "aten::linalg_eigvals", "aten::linalg_eigvals.out", "aten::_linalg_eigvals",
})


def _device_tensors(values, device_type: str):
    for value in values:
        if isinstance(value, torch.Tensor):
            if value.device.type == device_type:
                yield value
        elif isinstance(value, (list, tuple)):
            yield from _device_tensors(value, device_type)


def _unheld_result(name: str, args, kwargs, device_type: str) -> Optional[torch.dtype]:
    """The dtype DirectML cannot hold (complex, bfloat16) a call would put on the device, if it would."""
    dtype = kwargs.get("dtype")
    device = kwargs.get("device")
    # where the result goes: the device a call names (a copy off the device, x.to("cpu", torch.bfloat16), runs on
    # real DirectML: measured), else where its tensors are
    on_device = torch.device(device).type == device_type if device is not None else \
        any(True for _ in _device_tensors(args, device_type))
    if isinstance(dtype, torch.dtype) and dtype in UNHELD_DTYPES and on_device:
        return dtype
    if device is not None and torch.device(device).type == device_type and dtype is None:
        source = next((a for a in args if isinstance(a, torch.Tensor)), None)  # _to_copy(cpu_complex, device=dml)
        if source is not None and source.dtype in UNHELD_DTYPES:
            return source.dtype
    if name in _MAKES_COMPLEX and on_device:
        return torch.complex64 if torch.get_default_dtype() != torch.float64 else torch.complex128
    return None


def failure(name: str, args, kwargs, device_type: str, float64: bool = True) -> Optional[Failure]:
    """How a call of ``name`` with these arguments fails on DirectML, or ``None`` when DirectML runs it;
    ``float64``: whether the adapter runs float64 (some calls fail only on one that does not)."""
    first = _BEFORE_DTYPES.get(name)
    if first is not None and _touches_device(args, kwargs, device_type):
        found = first(args, kwargs)
        if found is not None:
            return found
    unheld = _unheld_result(name, args, kwargs, device_type)
    if unheld is not None:
        return unheld_dtype_failure(unheld)
    if name in INFERENCE_VIEW_OPS:  # a view is metadata: only its own rules (as_strided's bounds), no dims limit
        found = _inference_view(args, kwargs, device_type)
        rule = RULES.get(name)
        if found is None and rule is not None and _touches_device(args, kwargs, device_type):
            found = rule(args, kwargs)
        return found
    if name in _SIZED:
        device = kwargs.get("device")
        on_device = (device is not None and torch.device(device).type == device_type) or \
            any(True for _ in _device_tensors(args, device_type))
        if too_large(name, args, kwargs, on_device) is not None:
            return Failure(ABORTS, TOO_LARGE, "SIGABRT")
        if too_many_dims(name, args, kwargs, on_device):
            return Failure(ABORTS, MANY_DIMS, "SIGABRT")
    elif _many_dims_on_device(args, device_type):
        return Failure(ABORTS, MANY_DIMS, "SIGABRT")
    rule = RULES.get(name) or (None if float64 else WITHOUT_FLOAT64_RULES.get(name))
    if rule is None:
        return None
    if not _touches_device(args, kwargs, device_type):
        return None  # nothing of the call is on the device (an out= tensor counts)
    return rule(args, kwargs)


def _touches_device(args, kwargs, device_type: str) -> bool:
    return any(True for _ in _device_tensors((args, tuple(kwargs.values())), device_type)) or \
        torch.device(kwargs.get("device") or "cpu").type == device_type


#: view ops torch-directml makes with its own kernels: inside ``torch.inference_mode()`` a view of a tensor made
#: outside the mode raises there (measured on realdml: ``x[0]`` of such a tensor, and nn.Linear's forward, whose
#: ``weight.t()`` is one)
INFERENCE_VIEW_OPS = frozenset(f"aten::{name}" for name in (
    "view", "as_strided", "t", "transpose.int", "select.int", "slice.Tensor", "unsqueeze", "squeeze", "squeeze.dim",
    "squeeze.dims", "expand", "permute", "_reshape_alias", "alias", "unfold", "diagonal", "narrow", "split.Tensor",
    "split_with_sizes", "unbind.int", "chunk", "view_as_real", "_unsafe_view", "reshape", "flatten.using_ints"))
INFERENCE_VIEW_MESSAGE = "Cannot set version_counter for inference tensor"


def _inference_view(args, kwargs, device_type: str) -> Optional[Failure]:
    """A view, inside inference mode, of a device tensor made outside it."""
    if not torch.is_inference_mode_enabled():
        return None
    self = args[0] if args else kwargs.get("self")
    if isinstance(self, torch.Tensor) and self.device.type == device_type and not self.is_inference():
        return Failure(RAISES, INFERENCE_VIEW_MESSAGE)
    return None


#: calls that make a tensor of given sizes, or move one: judged for a tensor over 2^31 - 1 elements
_SIZED = frozenset(SIZED_FACTORIES) | {"aten::_to_copy"}


def ruled_ops() -> frozenset:
    """Every op a rule covers (the emulated device asks the rules before running these)."""
    return frozenset(RULES) | frozenset(WITHOUT_FLOAT64_RULES) | _MAKES_COMPLEX | _SIZED | INFERENCE_VIEW_OPS


def may_fail(name: str) -> bool:
    """Whether a call of ``name`` can fail on DirectML for a reason beyond its dtypes (cheap, for hot paths)."""
    return name in RULES or name in _MAKES_COMPLEX or name in WITHOUT_FLOAT64_RULES or name in _SIZED or \
        name in INFERENCE_VIEW_OPS


#: torch-directml's own errors for calls it refuses (its words, as a user sees them), with the
#: adapter-dependent float64 refusal among them: a run that raises one stopped on DirectML itself
_RAISED_BY_DIRECTML = (
    "does not support Double (Float64)", "Invalid or unsupported data type", "DirectML scatter doesn't allow",
    "Divisor override isn't supported for DirectML", INVALID_ARGUMENT, "Unknown error -2147467259",
    "input must be 4-dimensional", "not implemented for unique operator for DirectML",
    "argument is must be Contiguous for DML tensors", "Unknown error -2005270523",
    INFERENCE_VIEW_MESSAGE, "->CompileGraph(&graphDesc",
    "self.has_storage() INTERNAL ASSERT FAILED", "ensure_in_bounds: sizes", "Function CdistBackward0 returned",
    "Function NativeBatchNormBackward0 returned", "Function NativeBatchNormLegitBackward0 returned",
    "m_device->CreateOperator", "torch-dml currently doesn't support",
    # the fallback's CPU kernel is missing (nn.LSTM's fused cell): the call cannot run on DirectML at all
    "with arguments from the 'CPU' backend",
)


def _many_dims_on_device(args, device_type: str) -> bool:
    """A device tensor of :data:`DEVICE_MAX_DIMS` or more dimensions among a call's first two arguments (a view of
    one is judged as the view op it is, which runs)."""
    for value in args[:2]:
        if isinstance(value, torch.Tensor) and value.dim() >= DEVICE_MAX_DIMS and value.device.type == device_type:
            return True
    return False


def rule_for(device_type: str, float64: bool, op_name: Callable) -> Callable:
    """The rules as one call's judge, for a device of ``device_type`` (``op_name(func)`` names the op): cheap
    for the calls no rule covers (most), which carry no keyword arguments either."""
    def rule(func, args, kwargs) -> Optional[Failure]:
        name = op_name(func)
        if not kwargs and not may_fail(name) and not _many_dims_on_device(args, device_type):
            return None
        return failure(name, args, kwargs, device_type, float64)
    return rule


def note(exc: BaseException, found: Failure) -> None:
    """A call failed as a rule said: keep the rule's verdict with the exception, so the run says "fails on
    DirectML" whatever words the error came in (cdist's kernel raises a size mismatch; it also reshapes its
    inputs in place as it fails, so the rule is judged before the call)."""
    try:
        exc._directml_failure = found
    except AttributeError:  # an exception type that takes no attributes: its words still say it
        pass


def failure_in(exc: BaseException, touched_device: bool = True) -> Optional[Failure]:
    """The DirectML failure an exception is (a stand-in's or the guard's, or torch-directml's own words), else None.

    torch-directml's words count only for a call that ``touched_device`` (its tensors were on the device):
    the same words from a call with nothing there are not DirectML's doing."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, DirectMLFailure):
            return exc.failure
        if getattr(exc, "_directml_failure", None) is not None:
            return exc._directml_failure
        text = str(exc)
        aborted = _ABORT_TEXT.search(text)
        if aborted:  # the emulated device's words for an abort (it raises instead)
            return Failure(ABORTS, aborted.group("message").strip(), aborted.group("how"))
        if touched_device and any(marker in text for marker in _RAISED_BY_DIRECTML):
            return Failure(RAISES, text.strip().splitlines()[0][:500])
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class DirectMLSemantics:
    """What every DirectML backend (real, emulated, predicted) knows of torch-directml: the ops whose results
    were measured wrong, and the calls it refuses (a mixin beside :class:`~dmlprof.backends.base.Backend`)."""

    def flagged_ops(self) -> frozenset:
        from dmlprof.tables.wrong_classes import MASKED_BACKWARD_FORWARD_OPS, ops_with_classes
        from dmlprof.tables.measured import load_measured

        table = load_measured("dml")
        # the ops the report may point at by the user's line: the table's, the measured classes', and the
        # forward ops whose backward loses gradients (the line the user wrote is theirs)
        return (table.flagged_ops() if table is not None else frozenset()) | ops_with_classes() | \
            frozenset(MASKED_BACKWARD_FORWARD_OPS)

    def failure_rule(self):
        from dmlprof.record.frame import op_name

        return rule_for(self.device_type, self.float64_support is not False, op_name)

    #: whether this device's views report the offset in their storage the CPU would give them (real
    #: torch-directml's report 0: their offsets are then worked out from the calls that made them)
    views_report_offsets = True

    def arguments_rule(self):
        from dmlprof.directml.call_arguments import arguments_judge

        offsets = self.intended_offsets()
        return arguments_judge(self.read_values, offsets.offset_of if offsets is not None else None)

    def written_view_rule(self):
        """``judge(func, args, kwargs) -> str`` for the written-view class alone (an in-place write into a view
        past its base's start): what the threads the recorder does not record are judged for (it reads no values)."""
        from dmlprof.directml.call_arguments import written_view_judge

        offsets = self.intended_offsets()
        return written_view_judge(offsets.offset_of if offsets is not None else None)

    def view_rule(self):
        """``note(func, args, kwargs, out)`` after each recorded call, keeping the offsets of the views it made
        where the device's views do not report them; None where they do (no work per call)."""
        offsets = self.intended_offsets()
        return offsets.note if offsets is not None else None

    def intended_offsets(self):
        """This backend's :class:`~dmlprof.directml.view_offsets.IntendedOffsets` (one per backend), or None."""
        if self.views_report_offsets:
            return None
        if getattr(self, "_intended_offsets", None) is None:
            from dmlprof.directml.view_offsets import IntendedOffsets
            from dmlprof.record.frame import op_name

            self._intended_offsets = IntendedOffsets(op_name)
        return self._intended_offsets

    def read_values(self, tensor):
        """A device tensor's values on the CPU, or None (the prediction's stand-in reads only what it holds)."""
        from dmlprof.directml.call_arguments import read_device_values

        return read_device_values(tensor)

    def note_failure(self, exc: BaseException, failure) -> None:
        note(exc, failure)

    def failure_in(self, exc: BaseException, touched_device: bool = True):
        return failure_in(exc, touched_device)


class AbortNote(NamedTuple):
    """Aborts a stand-in device raised in calls' places since its note was last taken, and the first one's words
    (the emulated device keeps its note in C++, the prediction's stand-in in Python: both hand it over as this)."""

    count: int
    op: str  # "" where the first one's words are not at hand (noted just as the last take ran)
    message: str
    pid: int  # the process that raised it: a forked child's differs from this one's
    thread: int  # its OS thread (``threading.get_native_id()``), 0 where unknown
