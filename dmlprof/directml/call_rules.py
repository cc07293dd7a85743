"""Failure rules keyed by the class of call they were measured for (issue 32 / R26).

Each :class:`ClassRule` names the ops it covers, the class of their calls that fails on the real
torch-directml 0.2.5 (a predicate on arguments, shapes, dtypes and flags), what happens there (raises, or
ends the process) and the evidence. A call outside the class is not refused: the class is what was
measured, not the op. :mod:`dmlprof.directml.failures` merges these into its ``RULES``, so the prediction
(``--target dml``), the emulated device and the live guard on real DirectML all judge a call alike.

Evidence: ../shared/BACKEND_FACTS.md "Measured in turn 4" (held-out OpInfo samples on realdml, each in a
fresh process), issue 33 R26 (a 242-call crash probe on the real torch-directml).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch

#: the evidence strings the rules cite (kept short: ``dmlprof ops`` prints them)
HELD_OUT = "held-out OpInfo samples on realdml (lavapipe), turn 4, each in a fresh process"
CRASH_PROBE = "242-call crash probe on the real torch-directml (issue 33, R26)"

#: glog's words for a device that is gone: every later call in the process fails (0x887A0005)
DEVICE_REMOVED = "DXGI_ERROR_DEVICE_REMOVED (Unknown error -2005270523)"
#: the most elements a DirectML tensor may hold: its sizes and offsets are 32-bit
MAX_ELEMENTS = 2 ** 31 - 1
#: a device tensor of this many dimensions or more ends the process in any kernel that makes, moves or reads it
#: (measured on realdml, torch-directml 0.2.5: "stack smashing detected", SIGABRT, for torch.zeros([2]*11), .to() of
#: [2]*11, [1]*11 and [2]*12 tensors, add/mul/neg of [2]*12 and add of an 11-D unsqueeze view; [2]*10 moves and adds;
#: a view of one is metadata and runs)
DEVICE_MAX_DIMS = 11
MANY_DIMS = f"a tensor of {DEVICE_MAX_DIMS} or more dimensions on the device crashes torch-directml (stack smashing detected)"
#: reductions of an input of this many dimensions or more end the process (measured on realdml: sum, mean, amax of
#: a [2]*6 input abort at "rank <= DML_TENSOR_DIMENSION_COUNT_MAX"; [2]*5 runs; issue 33 R26 saw 9-D)
REDUCTION_MAX_DIMS = 6
#: elementwise ops on a tensor with this many size-1 dimensions or more end the process (measured on realdml: add,
#: mul, relu of [1]*6 .. [1]*12 abort at "broadcast_sizes.size() >= sizes.size()"; [1]*5 runs, and [2]*6 .. [2]*9 run)
UNIT_DIMS_MAX = 6
#: F.prelu of an input of this many dimensions or more ends the process whatever its weight (measured on realdml:
#: [2, 4, 3, 3, 3, 3] and 7-D with one weight abort at "rank <= DML_TENSOR_DIMENSION_COUNT_MAX"; 5-D runs)
PRELU_MAX_DIMS = 6


@dataclass(frozen=True)
class ClassRule:
    """A failure measured for a class of calls: ``check(args, kwargs)`` says whether a call is in it."""

    ops: Tuple[str, ...]
    kind: str  # "raises" or "aborts" (dmlprof.directml.failures.RAISES / ABORTS)
    klass: str  # the class, in words (dmlprof ops prints it)
    message: str  # torch-directml's words (or a description of the crash)
    evidence: str
    check: Callable
    how: str = ""  # for an abort: the signal
    #: torch-directml checks this before it makes any tensor, so a call in the class that also asks for a dtype it
    #: cannot hold (x.bfloat16(memory_format=torch.channels_last)) raises these words instead of ending the process
    before_dtypes: bool = False


def _self(args, kwargs):
    value = args[0] if args else kwargs.get("self", kwargs.get("input"))
    return value if isinstance(value, torch.Tensor) else None


def _arg(args, kwargs, index: int, name: str, default=None):
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _flip_negative_or_0d(args, kwargs) -> bool:
    self = _self(args, kwargs)
    dims = _arg(args, kwargs, 1, "dims", ())
    if self is None:
        return False
    if self.dim() == 0:  # flip(x, []) of a 0-d tensor runs (measured): a dim given does not
        return bool(dims)
    return any(isinstance(d, int) and d < 0 for d in (dims if isinstance(dims, (list, tuple)) else (dims,)))


def _median_dim_aborts(args, kwargs) -> bool:
    """float16 along any dimension; float32 (and other floating dtypes) of 2+ dims. A float32 0-d/1-D input
    runs (it comes back with shape (0,): a wrong result, the measured table's), integer inputs fall back."""
    self = _self(args, kwargs)
    if self is None or not self.is_floating_point():
        return False
    return self.dtype == torch.float16 or self.dim() >= 2


def _layer_norm_backward_mask(args, kwargs) -> list:
    mask = _arg(args, kwargs, 7, "output_mask", None)
    return list(mask) if isinstance(mask, (list, tuple)) else [True, True, True]


def _layer_norm_backward_frozen_affine(args, kwargs) -> bool:
    """weight and bias exist, but one of them does not require grad (output_mask says so). A weight without a bias
    (bias=False) is left out: on realdml it ran in OpInfo's sample and in a plain F.layer_norm backward, and lost
    the device only where the output had been read back before the backward (not isolated: no rule)."""
    weight, bias = _arg(args, kwargs, 5, "weight"), _arg(args, kwargs, 6, "bias")
    if not (isinstance(weight, torch.Tensor) and isinstance(bias, torch.Tensor)):
        return False
    mask = _layer_norm_backward_mask(args, kwargs)
    return mask[0] and not (mask[1] and mask[2])


def _layer_norm_backward_without_affine(args, kwargs) -> bool:
    """No weight (elementwise_affine=False, or a bias alone: both measured on realdml, "tensor does not have a
    device"). A weight without a bias runs (see :func:`_layer_norm_backward_frozen_affine`)."""
    return not isinstance(_arg(args, kwargs, 5, "weight"), torch.Tensor)


def _layer_norm_backward_input_without_grad(args, kwargs) -> bool:
    return not _layer_norm_backward_mask(args, kwargs)[0]


#: c10::MemoryFormat's codes: the emulated device hands a rule a memory format as this integer
_MEMORY_FORMAT_CODES = {0: torch.contiguous_format, 1: torch.preserve_format, 2: torch.channels_last,
                        3: torch.channels_last_3d}


def _memory_format(value):
    return _MEMORY_FORMAT_CODES.get(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _made_on_device_channels_last(args, kwargs) -> bool:
    """A tensor made on the device in a channels-last layout, asked for by name (``memory_format=``).

    Measured on realdml (issue 32): torch-directml's ``empty.memory_format`` refuses every layout but contiguous, and
    it is where ``_to_copy`` (``x.to(memory_format=...)``, ``x.half(memory_format=...)``, ``model.to(memory_format=
    ...)``, a CPU tensor ``.to(device, memory_format=...)``), ``clone``, ``empty_like`` and ``zeros_like`` make their
    result when given one, 4-D, 5-D or 3-D input, with or without a dtype change. ``preserve_format`` runs (a
    channels-last tensor moved from the CPU stays one), a copy to the CPU runs, and ``x.contiguous(memory_format=
    torch.channels_last)`` of a contiguous tensor is left as it is (its tensors say they are contiguous in every
    layout: :func:`dmlprof.directml.device_module.contiguous_as_on_directml`)."""
    if _memory_format(kwargs.get("memory_format")) not in (torch.channels_last, torch.channels_last_3d):
        return False
    destination = kwargs.get("device")
    if destination is None:  # empty.memory_format names its device; the others make it where self is
        self = _self(args, kwargs)
        return self is not None and self.device.type != "cpu"
    return torch.device(destination).type != "cpu"


def _empty_self(args, kwargs) -> bool:
    self = _self(args, kwargs)
    return self is not None and self.numel() == 0


def _zero_dim_self(args, kwargs) -> bool:
    self = _self(args, kwargs)
    return self is not None and self.dim() == 0


def _unique_asks(name: str, index: int) -> Callable:
    """A unique op called with its flag ``name`` (``return_counts``, ``return_inverse``) set, at ``index``."""
    def check(args, kwargs) -> bool:
        return bool(_arg(args, kwargs, index, name, False))
    return check


def _two_or_more_dims(args, kwargs) -> bool:
    self = _self(args, kwargs)
    return self is not None and self.dim() >= 2


def _negative_dim_past_four(args, kwargs) -> bool:
    """A negative dim that reaches past a 4-D layout: the input's dimensions plus the dim's distance from the end
    are 5 or more (-2 of a 3-D input, -1 of a 4-D one)."""
    self, dim = _self(args, kwargs), _arg(args, kwargs, 1, "dim")
    return self is not None and isinstance(dim, int) and dim < 0 and self.dim() - dim >= 5


def _repeat_to_nothing(args, kwargs) -> bool:
    """An empty result: an input with a dimension of size 0, or a repeat count of 0."""
    self = _self(args, kwargs)
    repeats = _arg(args, kwargs, 1, "repeats", ())
    return self is not None and (self.numel() == 0 or any(int(count) == 0 for count in repeats))


def _reduction_of_many_dims(args, kwargs) -> bool:
    self = _self(args, kwargs)
    return self is not None and self.dim() >= REDUCTION_MAX_DIMS


def _many_unit_dims(args, kwargs) -> bool:
    tensors = [a for a in args[:2] if isinstance(a, torch.Tensor)]
    return any(sum(1 for size in t.shape if size == 1) >= UNIT_DIMS_MAX for t in tensors)



def _prelu_parts(args, kwargs, self_at: int) -> tuple:
    """(input, weight) of _prelu_kernel (self_at 0) or _prelu_kernel_backward (self_at 1: after grad_output)."""
    self = _arg(args, kwargs, self_at, "self")
    weight = _arg(args, kwargs, self_at + 1, "weight")
    if not isinstance(self, torch.Tensor) or not isinstance(weight, torch.Tensor):
        return None, None
    return self, weight


def _prelu_forward_aborts(args, kwargs) -> bool:
    """F.prelu's kernel: a weight of more than one element (nn.PReLU(C)) on a 4-D or 5-D input, or an input of
    PRELU_MAX_DIMS or more dimensions with any weight (measured on realdml, float32 and float16)."""
    self, weight = _prelu_parts(args, kwargs, 0)
    return self is not None and (self.dim() >= PRELU_MAX_DIMS or (weight.numel() > 1 and self.dim() >= 4))


def _prelu_backward_aborts(args, kwargs) -> bool:
    """_prelu_kernel_backward with a weight of more than one element and an input of 5 or more dimensions."""
    self, weight = _prelu_parts(args, kwargs, 1)
    return self is not None and weight.numel() > 1 and self.dim() >= 5


def _channels_do_not_broadcast(self, weight) -> bool:
    """A per-channel weight with a batch size other than 1 and the channel count: torch-directml lines the
    weight's channels up with the batch dimension, which then must broadcast (measured: batch 2, 3, 8 of 4
    channels raise; batch 1 and 4 run, with wrong values)."""
    return weight.numel() > 1 and self.shape[0] not in (1, weight.numel())


def _prelu_forward_raises(args, kwargs) -> bool:
    """F.prelu's kernel on a 3-D input (N, C, L) with a per-channel weight whose channels do not broadcast."""
    self, weight = _prelu_parts(args, kwargs, 0)
    return self is not None and self.dim() == 3 and _channels_do_not_broadcast(self, weight)


def _prelu_backward_raises(args, kwargs) -> bool:
    """_prelu_kernel_backward of a 2-D or 3-D input with a per-channel weight whose channels do not broadcast."""
    self, weight = _prelu_parts(args, kwargs, 1)
    return self is not None and self.dim() in (2, 3) and _channels_do_not_broadcast(self, weight)


#: torch-directml's words, measured on realdml
_UNIQUE_COUNTS = "Return counts not implemented for unique operator for DirectML."
_UNIQUE_INVERSE = "Return inverse not implemented for unique operator for DirectML."
#: DirectML's own "invalid argument" (E_INVALIDARG, 0x80070057), as torch-directml words it
INVALID_ARGUMENT = "Unknown error -2147024809"
#: where issue 32's class boundaries were measured
_BOUNDARIES = "boundaries measured on realdml, each call in a fresh process (issue 32)"
#: PReLU's classes: ranks 1-7, one weight and 4, float32 and float16, forward and backward (re-probe 12, case 23)
_PRELU_MEASURED = "measured on realdml, ranks 1 to 7, float32 and float16, forward and backward (re-probe 12)"
_PRELU_BROADCAST = "The size of tensor a (C) must match the size of tensor b (N) at non-singleton dimension 2"

_REDUCTIONS = tuple(f"aten::{name}" for name in (
    "sum", "sum.dim_IntList", "sum.IntList_out", "mean", "mean.dim", "mean.out", "amax", "amax.out", "amin",
    "amin.out", "prod", "prod.dim_int", "max", "max.dim", "min", "min.dim", "argmax", "argmin", "any", "any.dim",
    "any.dims", "all", "all.dim", "all.dims", "std.correction", "var.correction", "var_mean.correction",
    "std_mean.correction", "logsumexp", "norm.ScalarOpt_dim", "linalg_vector_norm"))

#: set_'s measured class (re-probe 22, case 11; each call in a process of its own on realdml)
_SET_MEASURED = ("re-probe 22, case 11: 22 set_ calls on realdml, each in a fresh process: an empty device tensor "
                 "set_ to a non-empty device tensor, view, CPU tensor or CPU storage (with and without an offset) dies "
                 "of SIGSEGV; a non-empty one, or an empty source, runs")


def _set_onto_empty_device_tensor(args, kwargs) -> bool:
    """``torch.empty(0, device=d).set_(x)``: a device tensor holding no element takes a non-empty source, a tensor
    (the device's or the CPU's) or a CPU storage. The source's storage on the device is left out: torch-directml
    gives none to take (``untyped_storage()`` raises), and dmlprof's own storage copies on the emulated device make
    that call."""
    self = _self(args, kwargs)
    if self is None or self.device.type == "cpu" or self.numel() != 0:
        return False
    source = _arg(args, kwargs, 1, "source")
    if isinstance(source, torch.Tensor):
        return source is not self and source.numel() > 0
    if getattr(source, "device", None) is None or source.device.type != "cpu":
        return False
    size = _arg(args, kwargs, 3, "size")
    return _numel(size) > 0 if size is not None else source.nbytes() > 0


#: scatter's and scatter_add's forms: what DirectML's scatter operator runs
SCATTERS = tuple(f"aten::{name}" for name in (
    "scatter.src", "scatter.value", "scatter_.src", "scatter_.value", "scatter.src_out", "scatter.value_out",
    # scatter(..., reduce=): the same kernel of torch-directml's (measured: an index narrower outside dim is refused)
    "scatter.reduce", "scatter.value_reduce", "scatter_.reduce", "scatter_.value_reduce", "scatter.reduce_out",
    "scatter.value_reduce_out"))
SCATTER_ADDS = ("aten::scatter_add", "aten::scatter_add_", "aten::scatter_add.out")

CLASS_RULES: Tuple[ClassRule, ...] = (
    ClassRule(("aten::flip", "aten::flip.out"), "aborts",
              "a negative dim in dims, or a 0-d input flipped along a dim (also reached by the backward of cumsum(x, -1) and by "
              "rot90 with negative dims); flip with non-negative dims of a 1-D+ input runs",
              "flip with a negative dim crashes torch-directml", HELD_OUT + "; " + CRASH_PROBE,
              _flip_negative_or_0d, "SIGSEGV"),
    ClassRule(("aten::median.dim", "aten::median.dim_values", "aten::nanmedian.dim", "aten::nanmedian.dim_values"),
              "aborts", "along a dim: float16 of any shape, float32 of 2+ dims (float32 0-d/1-D runs with a wrong "
              "(0,) shape; integer inputs fall back to the CPU)",
              "median/nanmedian along a dimension on the device crashes", HELD_OUT + "; " + CRASH_PROBE,
              _median_dim_aborts, "SIGSEGV"),
    ClassRule(("aten::native_layer_norm_backward", "aten::native_layer_norm_backward.out"), "aborts",
              "LayerNorm's backward where the input requires grad and weight or bias is frozen "
              "(requires_grad=False): the device is removed, every later call in the process fails",
              DEVICE_REMOVED, HELD_OUT, _layer_norm_backward_frozen_affine, "device removed"),
    ClassRule(("aten::native_layer_norm_backward", "aten::native_layer_norm_backward.out"), "raises",
              "LayerNorm's backward without weight or bias (elementwise_affine=False)",
              "tensor does not have a device", HELD_OUT + "; rechecked on realdml (issue 32)",
              _layer_norm_backward_without_affine),
    ClassRule(("aten::native_layer_norm_backward", "aten::native_layer_norm_backward.out"), "raises",
              "LayerNorm's backward with an input that does not require grad (a frozen first layer's input)",
              "device1->CompileGraph(&graphDesc, flags, IID_PPV_ARGS(&compiledGraph))",
              HELD_OUT + "; rechecked on realdml (issue 32)", _layer_norm_backward_input_without_grad),
    # empty.memory_format is the device kernel that refuses (the composites above it run on every path's device):
    # listed, so the prediction's stand-in and the emulated device raise where torch-directml does
    ClassRule(("aten::_to_copy", "aten::_to_copy.out", "aten::clone", "aten::empty_like", "aten::zeros_like",
               "aten::empty.memory_format"), "raises",
              "a tensor made on the device with memory_format=torch.channels_last (or channels_last_3d): "
              "x.to(memory_format=...), x.half(memory_format=...) and other dtype changes, model.to(memory_format=...), "
              "x.cpu().to(device, memory_format=...), x.clone(memory_format=...), empty_like/zeros_like(..., "
              "memory_format=...); preserve_format, a copy to the CPU, and a CPU tensor made channels-last then moved run",
              "'memory_format' argument is must be Contiguous for DML tensors",
              HELD_OUT + "; 32 calls measured on realdml (issue 32): 21 raise, 11 run", _made_on_device_channels_last, before_dtypes=True),
    ClassRule(("aten::constant_pad_nd", "aten::constant_pad_nd.out", "aten::native_layer_norm",
               "aten::native_layer_norm.out"), "raises", "an empty input (a dimension of size 0)",
              "m_device->CreateOperator(&opDesc, IID_PPV_ARGS(&op))", HELD_OUT + "; rechecked on realdml (issue 32)",
              _empty_self),
    ClassRule(("aten::gather", "aten::gather.out"), "raises", "gather from a 0-d input",
              INVALID_ARGUMENT, HELD_OUT, _zero_dim_self),
    ClassRule(("aten::_unique2", "aten::_unique2.out"), "raises", "unique(..., return_counts=True)",
              _UNIQUE_COUNTS, HELD_OUT + "; rechecked on realdml by issue 32's rules",
              _unique_asks("return_counts", 3)),
    ClassRule(("aten::unique_dim", "aten::unique_dim.out"), "raises", "unique(..., dim=d, return_counts=True)",
              _UNIQUE_COUNTS, HELD_OUT, _unique_asks("return_counts", 4)),
    ClassRule(("aten::_unique2", "aten::_unique2.out"), "raises",
              "unique(..., return_inverse=True) without dim, of any shape and dtype, sorted or not (with dim=d, and "
              "unique_consecutive's inverse, run)", _UNIQUE_INVERSE, HELD_OUT + "; " + _BOUNDARIES,
              _unique_asks("return_inverse", 2)),
    # after the two rules above: a 2-D+ call asking for counts or the inverse raises their words first (measured)
    ClassRule(("aten::_unique2", "aten::_unique2.out"), "aborts",
              "unique(...) without dim of an input of 2 or more dimensions, of any dtype and size (empty too), sorted or "
              "not (measured: float32, int32, int64 of (1, 1), (0, 3), (8, 7), (2, 3, 4) abort; 0-d and 1-D, and dim=d, "
              "run)", "Check failed: broadcast_sizes.size() >= sizes.size() (dml_tensor_desc.cc)",
              "measured on realdml, each call in a fresh process (issue 33, re-probe 10)", _two_or_more_dims, "SIGABRT"),
    ClassRule(SCATTERS + SCATTER_ADDS + ("aten::gather", "aten::gather.out"), "raises",
              "scatter, scatter_add or gather along a negative dim that reaches past a 4-D layout: input dimensions "
              "plus the dim's distance from the end of 5 or more (measured: -2 and -3 of 3-D, each negative dim of "
              "4-D, -1 of 5-D raise; -1 of 1-D to 3-D and -2 of 2-D, and every positive dim, run); also reached by "
              "the backward of sort, max, topk or mode along such a dim", INVALID_ARGUMENT,
              HELD_OUT + "; " + _BOUNDARIES, _negative_dim_past_four),
    ClassRule(("aten::repeat", "aten::repeat.out"), "raises",
              "repeat (and tile) to an empty result: an input with a dimension of size 0, or a repeat count of 0 "
              "(a non-empty result runs)", INVALID_ARGUMENT, HELD_OUT + "; " + _BOUNDARIES, _repeat_to_nothing),
    ClassRule(_REDUCTIONS, "aborts", f"a reduction of an input of {REDUCTION_MAX_DIMS} or more dimensions "
              "(measured: sum, mean, amax of [2]*6 abort, [2]*5 runs)",
              "Check failed: rank <= DML_TENSOR_DIMENSION_COUNT_MAX (dml_tensor_desc.cc)",
              CRASH_PROBE + "; boundaries measured on realdml (issue 32)", _reduction_of_many_dims, "SIGABRT"),
    ClassRule(tuple(f"aten::{name}" for name in ("add.Tensor", "add_.Tensor", "add.out", "sub.Tensor", "sub_.Tensor",
                                                 "mul.Tensor", "mul_.Tensor", "relu", "relu_")), "aborts",
              f"an elementwise op on a tensor with {UNIT_DIMS_MAX} or more dimensions of size 1 (measured: [1]*6 to "
              "[1]*12 abort, [1]*5 runs, [2]*6 to [2]*9 run)",
              "Check failed: broadcast_sizes.size() >= sizes.size() (dml_tensor_desc.cc)",
              CRASH_PROBE + "; boundaries measured on realdml (issue 32)", _many_unit_dims, "SIGABRT"),
    ClassRule(("aten::_prelu_kernel",), "aborts",
              "F.prelu / nn.PReLU with a weight of more than one element (nn.PReLU(C), per channel) on a 4-D or 5-D "
              f"input, or on an input of {PRELU_MAX_DIMS} or more dimensions with any weight (measured, float32 and "
              "float16: per-channel 4-D to 7-D abort; one weight runs up to 5-D; per-channel 2-D runs)",
              "Check failed: rank <= DML_TENSOR_DIMENSION_COUNT_MAX (dml_tensor_desc.cc)",
              _PRELU_MEASURED, _prelu_forward_aborts, "SIGABRT"),
    ClassRule(("aten::_prelu_kernel",), "raises",
              "F.prelu with a per-channel weight on a 3-D input (N, C, L) whose batch N is neither 1 nor C (batch 1 "
              "or C runs, with wrong values)",
              _PRELU_BROADCAST, _PRELU_MEASURED, _prelu_forward_raises),
    ClassRule(("aten::_prelu_kernel_backward",), "aborts",
              "the backward of a per-channel F.prelu of an input of 5 or more dimensions (measured: 5-D to 7-D abort)",
              "Check failed: broadcast_sizes.size() >= sizes.size() (dml_tensor_desc.cc)",
              _PRELU_MEASURED, _prelu_backward_aborts, "SIGABRT"),
    ClassRule(("aten::_prelu_kernel_backward",), "raises",
              "the backward of a per-channel F.prelu of a 2-D or 3-D input whose batch N is neither 1 nor C",
              _PRELU_BROADCAST, _PRELU_MEASURED, _prelu_backward_raises),
    ClassRule(("aten::set_.source_Tensor", "aten::set_.source_Storage", "aten::set_.source_Storage_storage_offset"),
              "aborts", "an empty device tensor set_ to a non-empty source: torch.empty(0, device=d).set_(x), of a "
              "device or a CPU tensor (a view too) or a CPU storage (with an offset too); a non-empty device tensor's "
              "set_, and an empty source, run",
              "set_ of an empty device tensor (set_'s CPU fallback) crashes", _SET_MEASURED,
              _set_onto_empty_device_tensor, "SIGSEGV"),
)

#: dtypes no DirectML tensor holds beyond the complex ones and bfloat16: a tensor of one on the device ends the
#: process (SIGABRT, glog's "Invalid or unsupported data type"), measured by the crash probe (R26). Looked up by
#: name: torch 2.4.1 lacks some of them.
EXTRA_UNHELD_DTYPES = {getattr(torch, name): label for name, label in (
    ("uint16", "UInt16"), ("uint32", "UInt32"), ("uint64", "UInt64"), ("float8_e4m3fn", "Float8_e4m3fn"),
    ("float8_e5m2", "Float8_e5m2"), ("float8_e4m3fnuz", "Float8_e4m3fnuz"), ("float8_e5m2fnuz", "Float8_e5m2fnuz"),
    ("bits8", "Bits8"), ("bits16", "Bits16"), ("bits1x8", "Bits1x8"), ("bits2x4", "Bits2x4"), ("bits4x2", "Bits4x2"),
) if isinstance(getattr(torch, name, None), torch.dtype)}

#: ops that make a tensor of the sizes they are given (the first argument): where a tensor over
#: :data:`MAX_ELEMENTS` would be made on the device
SIZED_FACTORIES = tuple(f"aten::{name}" for name in (
    "empty.memory_format", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint", "randint.low",
    "empty.out", "zeros.out", "ones.out", "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"))

TOO_LARGE = f"a tensor of more than 2^31 - 1 elements on the device crashes torch-directml"


def _numel(sizes) -> int:
    try:
        return math.prod(int(s) for s in sizes)
    except (TypeError, ValueError):
        return 0


def too_large(name: str, args, kwargs, on_device: bool) -> Optional[int]:
    """How many elements a call would put in one device tensor, when that is over :data:`MAX_ELEMENTS`."""
    if not on_device:
        return None
    if name in SIZED_FACTORIES:
        sizes = args[1] if name.startswith("aten::new_") and len(args) > 1 else (args[0] if args else
                                                                                 kwargs.get("size"))
        if isinstance(sizes, (list, tuple, torch.Size)):
            count = _numel(sizes)
            return count if count > MAX_ELEMENTS else None
    largest = max((a.numel() for a in args if isinstance(a, torch.Tensor)), default=0)
    return largest if largest > MAX_ELEMENTS else None


def too_many_dims(name: str, args, kwargs, on_device: bool) -> bool:
    """Whether a sized factory or a copy makes a device tensor of :data:`DEVICE_MAX_DIMS` or more dimensions."""
    if not on_device:
        return False
    if name in SIZED_FACTORIES:
        sizes = args[1] if name.startswith("aten::new_") and len(args) > 1 else (args[0] if args else
                                                                                 kwargs.get("size"))
        return isinstance(sizes, (list, tuple, torch.Size)) and len(sizes) >= DEVICE_MAX_DIMS
    return any(isinstance(a, torch.Tensor) and a.dim() >= DEVICE_MAX_DIMS for a in args[:1])


def rules_by_op() -> dict:
    """op -> the class rules that cover it (dmlprof.directml.failures merges them into its RULES)."""
    found: dict = {}
    for rule in CLASS_RULES:
        for op in rule.ops:
            found.setdefault(op, []).append(rule)
    return found


def rules_for(op: str) -> list:
    """The class rules of ``op`` (any overload, when ``op`` names none): what ``dmlprof ops`` shows."""
    base = op if op.startswith("aten::") else f"aten::{op}"
    return [r for r in CLASS_RULES if any(o == base or o.split(".", 1)[0] == base for o in r.ops)]
