"""Wrong results on DirectML, keyed by the class of call they were measured for (issue 32, items 2 and 3).

The measured table (:mod:`dmlprof.tables.measured`) says, per op overload and dtypes, how many of its
samples came back wrong. A call is flagged only where it falls in the class those wrong samples belong
to: this module holds the classes, and matches a recorded call (op, dtypes, input shapes, phase and, where
the recording kept them, its scalar arguments) against them. Three sources of classes:

- classes measured on real torch-directml outside dmlprof (:data:`CLASSES`): integer operands with a
  broadcast input of another rank, ``nll_loss`` over more than 100 classes ignoring ``ignore_index=-100``, the bool mask
  multiply of ``amax``'s backward, an in-place write into a view past its base's start whose gradient a
  backward takes (views report offset 0 there: the written slice's gradient is misplaced);
- the table entry's own ``wrong_class`` (what the generator measured the wrong samples to share; the
  field's form is :func:`entry_class_matches`'s);
- corrections of the shipped table's entries whose wrong samples were not wrong in anything a program
  reads (:data:`UNREAD_ONLY`) or belong to an argument's class (:data:`ARGUMENT_CLASSES`).

Torch-free: the report reads it.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

_INTEGER = ("int8", "int16", "int32", "int64", "uint8")
_FLOATING = ("float16", "float32", "float64", "bfloat16")

#: forward ops whose backward multiplies the gradient by a bool mask (the culprit a user wrote)
MASKED_BACKWARD_FORWARD_OPS = ("aten::amax", "aten::amin")

REALDML = "realdml (torch-directml 0.2.5 on lavapipe), rebuilt without dmlprof (issue 32)"


@dataclass(frozen=True)
class Call:
    """What the report knows of one device call: op overload, dtypes (``float32,int64``), input shapes, phase,
    and its scalar arguments where the recording kept them (None: not kept)."""

    op: str
    dtypes: Tuple[str, ...]
    shapes: Tuple[Tuple[int, ...], ...]
    phase: str = ""
    arguments: Optional[dict] = None


@dataclass(frozen=True)
class WrongClass:
    """A class of calls whose results are wrong on DirectML."""

    ops: Tuple[str, ...]
    klass: str  # the class, in words
    reason: str  # what is wrong, measured
    evidence: str
    match: Callable  # (Call) -> bool
    #: what it breaks, for the user ("" when nothing more than the values)
    consequence: str = ""
    #: what to change, where it was measured to help ("" when nothing was)
    fix: str = ""
    #: every gradient upstream of the call is lost: the report leads with it, as training is broken
    zeroes_gradients: bool = False
    confirmed_by: str = ""
    #: the call's own values are wrong, so replaying it alone shows it (scan --confirm); False where what goes
    #: wrong is later, in autograd's use of the call (the written-view class: the backward's CopySlices)
    wrong_in_replay: bool = True
    #: the calls are wrong only where an argument the recording could not read says so (a scatter index past
    #: the read's bound): said as calls that may be wrong, not counted against ``check``
    unjudged: bool = False
    #: the ops the class covers beyond ``ops``, by name, where no list can hold them (every in-place overload)
    named_by: Optional[Callable] = None

    def covers(self, op: str) -> bool:
        return op in self.ops or (self.named_by is not None and self.named_by(op))


def parse_shapes(text: str) -> Tuple[Tuple[int, ...], ...]:
    """The op frame's ``shapes`` column (``[[2, 3], [3]]``) as tuples; () when it cannot be read."""
    try:
        value = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(tuple(int(d) for d in s) for s in value if isinstance(s, list) and all(isinstance(d, int) for d in s))


def _broadcast_integer_operands(call: Call) -> bool:
    """Two tensor operands of different ranks, the lower-ranked one of more than one element, and an integer
    dtype among the call's. Measured on realdml (re-probe 16, 21): wrong where an integer operand is broadcast by
    leading dimensions it lacks ((5, 1) with (5,); (4, 16) with (16,); (4, 10, 16) with (10, 1)), right where the
    ranks are equal, whichever sizes broadcast ((4, 16) with (4, 1), the masked mean pooling; (1, 5) with (5, 1)),
    and right for a lower-ranked operand of one element ((4, 16) with (1,)). The recording keeps the call's dtypes
    as a set, not per operand, so a float operand of lower rank beside an integer one is flagged too (measured
    right: float (16,) by int64 (4, 16)). A 0-d operand is a scalar, not a broadcast input: unmeasured."""
    if len(call.shapes) < 2 or not any(d in _INTEGER for d in call.dtypes):
        return False
    first, second = call.shapes[0], call.shapes[1]
    if not first or not second or len(first) == len(second):
        return False
    lower = first if len(first) < len(second) else second
    return _elements(lower) > 1


def _elements(shape: Tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _float_with_integer_broadcast(call: Call) -> bool:
    """A float and an integer operand of different ranks (:func:`_broadcast_integer_operands`). Measured on realdml
    (re-probe 17, 9/32; tests/realdml/test_integer_broadcast_on_real_directml.py): float32 (4, 12) with int64 or
    int32 (12,) wrong in 36-44 of 48 elements for add, sub, rsub, mul and div, in place too, maximum 17 and minimum 9
    (where the integer operand wins); integer with integer right for these ops, as are equal ranks and
    comparisons."""
    return any(d in _INTEGER for d in call.dtypes) and any(d in _FLOATING for d in call.dtypes) \
        and _broadcast_integer_operands(call)


def _classes_of(call: Call) -> Optional[int]:
    """The number of classes of an nll_loss call (forward: input (N, C, ...) or (C,); backward: the input is
    the second tensor), else None."""
    index = 1 if "backward" in call.op else 0
    if len(call.shapes) <= index:
        return None
    shape = call.shapes[index]
    return shape[1] if len(shape) >= 2 else (shape[0] if len(shape) == 1 else None)


#: torch's default ignore_index
_DEFAULT_IGNORE = -100


def _nll_loss_over_100_classes(call: Call) -> bool:
    """More classes than -ignore_index: DirectML then reads the ignore index as class C - 100 (a valid class:
    measured 512 classes wrong, 7 and 10 exact). A recorded non-negative ignore_index is outside the class."""
    classes = _classes_of(call)
    arguments = call.arguments or {}
    ignore = arguments.get("ignore_index", _DEFAULT_IGNORE)
    # only where a target holds the ignore index (known from the call's values): labels that never do are right
    return classes is not None and isinstance(ignore, int) and ignore < 0 and classes > -ignore and \
        arguments.get("targets_ignored") is True


def _nll_loss_backward_of_unequal_rows(call: Call) -> bool:
    """nll_loss_backward(reduction="none") with incoming gradients that differ between rows (a weighted
    per-sample loss): every row gets the first row's gradient. A plain ``loss.mean()`` gives equal rows: right."""
    arguments = call.arguments or {}
    return arguments.get("reduction") == 0 and arguments.get("grad_output_varies") is True


def _bool_mask_multiply_in_backward(call: Call) -> bool:
    return call.phase == "backward" and "bool" in call.dtypes and any(d in _FLOATING for d in call.dtypes)


def _integer_product_with_fractional_scale(call: Call) -> bool:
    return all(d in _INTEGER for d in call.dtypes) and (call.arguments or {}).get("fractional_scale") is True


def _copy_off_the_device_to_another_dtype(call: Call) -> bool:
    """A copy from the device to the CPU that also converts (``x.to("cpu", torch.int32)``): measured on realdml,
    the result keeps the source's dtype for every dtype asked (float16, float64, int32, int64, bool from float32;
    float32 from float16). Copies onto the device and conversions on it are right."""
    arguments = call.arguments or {}
    dtype, source = arguments.get("dtype"), arguments.get("from_dtype")
    return arguments.get("to_device") == "cpu" and arguments.get("from_device") not in (None, "cpu") and \
        dtype is not None and source is not None and dtype != source


def _write_into_offset_view_under_autograd(call: Call) -> bool:
    """Recorded under autograd, and a backward ran through the CopySlices node it left: only that backward is
    wrong, the write's values are right (re-probe 15, cases 1 and 2: eval() inference without no_grad, a loss kept
    in ``losses[i]``). A session recorded before the recorder watched the backward has no ``backward_runs``."""
    arguments = call.arguments or {}
    return arguments.get("autograd_records") is True and arguments.get("backward_runs", True) is True


#: the key of a written view's arguments (dmlprof.directml.call_arguments): the recorder watches its backward
WRITTEN_VIEW_KEY = "view_offset"


def written_view_backpropagated(arguments: str, runs: bool = True) -> str:
    """A written view's arguments (JSON text) saying whether a backward ran through the CopySlices node its write
    left (``runs``; one that did was recorded by autograd, also where grad mode was off at the write: an
    ``autograd.Function``'s forward, whose ``ctx.mark_dirty`` makes the CopySlices when ``apply`` returns)."""
    found = json.loads(arguments)
    found["backward_runs"] = runs
    if runs:
        found["autograd_records"] = True
    return json.dumps(found, sort_keys=True)


def in_place_by_name(op: str) -> bool:
    """An in-place overload, by the dispatcher's naming (``aten::hardtanh_``, ``aten::_foreach_mul_.Scalar``): the
    ops the written-view class covers. The recorder keys it by the schema (a written ``self``, not a metadata-only
    view like ``unsqueeze_``); this torch-free side by the arguments the recorder kept (re-probe 14, case 21: a
    list of 32 names missed ``hardtanh_`` of ``nn.ReLU6(inplace=True)``, ``silu_``, ``sqrt_``...)."""
    base = op.split(".", 1)[0]
    return base.endswith("_") and not base.endswith("__")


#: what to write instead, each measured on realdml to give the CPU's gradient (tests/realdml)
WRITTEN_VIEW_FIX = ("build the tensor out of place instead of writing into the slice: "
                    "h = torch.cat([h[:, :4], torch.zeros_like(h[:, 4:])], 1), h = h.masked_fill(mask, 0) or "
                    "h = h * keep (a 0/1 mask); each gives the CPU's gradient on realdml")

def _scatter_with_repeated_targets(call: Call) -> bool:
    return (call.arguments or {}).get("targets_repeat") is True


def _scatter_with_unread_targets(call: Call) -> bool:
    """Recorded as a scatter_add whose index could not be read (beyond the prediction's values budget)."""
    return (call.arguments or {}).get("targets_read") is False


#: scatter_add's forms and scatter's with reduce= ('add', 'multiply'): one write per target survives
SCATTER_ACCUMULATING_OPS = ("aten::scatter_add", "aten::scatter_add_", "aten::scatter_add.out", "aten::scatter.reduce",
                            "aten::scatter_.reduce", "aten::scatter.reduce_out")
_SCATTER_REASON = ("one write per target is kept where several elements of the index name it: scatter_add of 6 "
                   "values into 6 with repeated targets max error 9.9 (float32; float16, int32, int64 alike), "
                   "scatter(reduce='multiply') 51.6; unique targets exact; scatter_reduce('sum'/'amax'), index_add "
                   "and index_put(accumulate=True) exact with the same repeated targets")
_SCATTER_CONSEQUENCE = ("sums (message passing, histograms, segment sums) and the gradient of gather with repeated "
                        "indices are wrong")
_SCATTER_FIX = ("use index_add (a 1-D index along the dim) or scatter_reduce(..., 'sum'): both exact on realdml "
                "with repeated targets")
_SCATTER_EVIDENCE = REALDML + " (re-probe 12, case 25; unconfirmed on real hardware)"


def _rrelu_in_training_under_autograd(call: Call) -> bool:
    """``rrelu_with_noise`` in training whose input's gradient autograd will take (nn.RReLU in ``train()``, an input
    that requires grad, grad mode on). torch-directml has no kernel of it: its fallback (torch's cpu_fallback on
    torch 2.4.1, whose schema leaves ``noise`` unmarked) never copies the slopes it drew back into ``noise``, and the
    backward multiplies the gradient by ``noise`` (re-probe 21, case 27). In evaluation the slope is fixed, and
    without autograd nothing reads ``noise``: right."""
    arguments = call.arguments or {}
    return arguments.get("training") is True and arguments.get("input_grad_taken") is True


#: RReLU's ops: the functional, in place (nn.RReLU(inplace=True)) and out=
RRELU_OPS = ("aten::rrelu_with_noise", "aten::rrelu_with_noise_", "aten::rrelu_with_noise.out")
_RRELU_FIX = ("use nn.LeakyReLU((lower + upper) / 2) (RReLU's evaluation slope, 0.2 for RReLU(0.1, 0.3)), draw the "
              "slopes on the device (torch.where(x >= 0, x, x * torch.empty_like(x).uniform_(lower, upper))), or run "
              "the RReLU on the CPU (act(x.cpu()).to(x.device)): each gives the CPU's gradient on realdml")


def _per_channel_prelu(call: Call, input_at: int, dims: Tuple[int, ...]) -> bool:
    """A PReLU kernel call whose input (``input_at``) has one of ``dims`` dimensions and whose weight (the next
    shape) has more than one element (nn.PReLU(C))."""
    if len(call.shapes) <= input_at + 1:
        return False
    weight = call.shapes[input_at + 1]
    elements = 1
    for size in weight:
        elements *= size
    return len(call.shapes[input_at]) in dims and elements > 1


def _per_channel_prelu_of_3d(call: Call) -> bool:
    return _per_channel_prelu(call, 0, (3,))


def _per_channel_prelu_backward(call: Call) -> bool:
    return _per_channel_prelu(call, 1, (2, 3, 4))


_PRELU_EVIDENCE = REALDML + " (re-probe 12, case 23)"
_PRELU_FIX = "use nn.PReLU() (one weight), or compute the PReLU on the CPU and move the result to the device"

_INTEGER_BROADCAST_OPS = tuple(f"aten::{name}" for name in (
    "remainder.Tensor", "remainder_.Tensor", "div.Tensor", "div_.Tensor", "div.Tensor_mode", "div_.Tensor_mode",
    "floor_divide", "floor_divide_.Tensor", "atan2", "atan2_", "pow.Tensor_Tensor", "pow_.Tensor"))

_FLOAT_WITH_INTEGER_OPS = tuple(f"aten::{name}" for name in (
    "mul.Tensor", "mul_.Tensor", "add.Tensor", "add_.Tensor", "sub.Tensor", "sub_.Tensor", "rsub.Tensor", "maximum",
    "minimum"))

CLASSES: Tuple[WrongClass, ...] = (
    WrongClass(_INTEGER_BROADCAST_OPS, "integer operands of different ranks (e.g. (5, 1) with (5,))",
               "values differ: torch.remainder(randint((5,1)), randint((5,))) 13 of 25 elements wrong; equal "
               "shapes are right", REALDML, _broadcast_integer_operands,
               "the result is wrong wherever an operand is broadcast", fix="give both operands the same number of dimensions "
               "first (x[None] or keepdim=True)"),
    WrongClass(_FLOAT_WITH_INTEGER_OPS, "a float tensor with an integer tensor of another rank (an ALiBi bias: "
               "scores - torch.arange(T))",
               "values differ: randn(5,1) * randint((5,)) 20 of 25 elements wrong; randn(4, 12) - arange(12) 40 of "
               "48 (add, sub, rsub, mul, maximum alike)", REALDML,
               _float_with_integer_broadcast, fix="cast the integer operand to the float dtype first (pos.float())"),
    WrongClass(("aten::addmm", "aten::baddbmm"), "integer addmm/baddbmm with a fractional alpha or beta",
               "values differ from the CPU's (measured; BACKEND_FACTS.md, turn 4)", REALDML,
               _integer_product_with_fractional_scale, fix="scale in floating point, or give integer alpha and beta"),
    WrongClass(("aten::nll_loss_forward", "aten::nll_loss2d_forward", "aten::nll_loss_backward",
                "aten::nll_loss2d_backward"),
               "cross_entropy / nll_loss over more than 100 classes with ignore_index=-100 (the default), targets "
               "holding it",
               "targets equal to ignore_index are not ignored (512 classes: loss 7.374 vs 7.273 on the CPU, the "
               "padding rows get gradient; 7 and 10 classes: exact)", REALDML + "; --verify --device dml",
               _nll_loss_over_100_classes,
               "padded targets (-100) count in the loss and its gradient: a language model fine-tuned with "
               "padding trains on its padding"),
    WrongClass(("aten::nll_loss_backward", "aten::nll_loss2d_backward"),
               "nll_loss_backward with reduction='none' and incoming gradients that differ between rows",
               "every row gets grad_output[0] (max error 0.083 measured)", REALDML + " (issue 33: R31)",
               _nll_loss_backward_of_unequal_rows,
               "a weighted per-sample loss trains on wrong gradients: reduce before the loss's backward, e.g. "
               "(F.cross_entropy(x, y, reduction='none') * w) gives every row the first row's weight"),
    WrongClass(("aten::_to_copy",), "a copy from the device to the CPU that also converts its dtype",
               "the dtype asked for is ignored: x.to('cpu', torch.int32) of a float32 tensor is float32, "
               "x.to('cpu', torch.float32) of a float16 one float16", REALDML + " (issue 33: R39)",
               _copy_off_the_device_to_another_dtype,
               "the CPU tensor has the device tensor's dtype, not the one asked for",
               fix="convert, then copy (x.to(torch.int32).cpu()), or copy, then convert (x.cpu().to(torch.int32)): "
                   "both right on realdml"),
    WrongClass((), "an in-place write into a view that starts past its base's start (h[:, 4:] = 0, "
               "z[1] = 0, x[1:].mul_(2), nn.ReLU6(inplace=True)(h[:, 4:]), an autograd.Function writing "
               "z[:, 2:] with ctx.mark_dirty) whose gradient a backward takes",
               "the view reports storage_offset() 0 on DirectML, so autograd's CopySlices puts the written slice's "
               "gradient at the base's start: z = x * 1; z[1] = 0 gives x.grad [0, 1], the CPU [1, 0]; the forward "
               "values are right", REALDML + " (issue 33: re-probe 12, case 41)",
               _write_into_offset_view_under_autograd,
               "the gradients flowing back through the written tensor are wrong: the model trains on them",
               fix=WRITTEN_VIEW_FIX, wrong_in_replay=False, named_by=in_place_by_name),
    WrongClass(SCATTER_ACCUMULATING_OPS, "scatter_add (or scatter with reduce=) whose index repeats a target",
               _SCATTER_REASON, _SCATTER_EVIDENCE, _scatter_with_repeated_targets, _SCATTER_CONSEQUENCE,
               fix=_SCATTER_FIX),
    WrongClass(SCATTER_ACCUMULATING_OPS, "scatter_add (or scatter with reduce=) whose index values were not read: "
               "wrong wherever its index repeats a target",
               _SCATTER_REASON, _SCATTER_EVIDENCE, _scatter_with_unread_targets, _SCATTER_CONSEQUENCE,
               fix=_SCATTER_FIX, unjudged=True),
    WrongClass(("aten::_prelu_kernel",), "a per-channel PReLU (nn.PReLU(C)) of a 3-D input (N, C, L)",
               "values differ: (4, 4, 4) max error 0.36, (1, 4, 5) 0.56 (a batch other than 1 or C raises; 2-D is "
               "exact; 4-D and 5-D end the process)", _PRELU_EVIDENCE, _per_channel_prelu_of_3d,
               "the activation's output is wrong", fix=_PRELU_FIX),
    WrongClass(("aten::_prelu_kernel_backward",), "the backward of a per-channel PReLU (nn.PReLU(C)) of a 2-D to "
               "4-D input", "the input's gradient differs: (4, 4) max error 0.51, (4, 4, 4) 0.40, (2, 4, 3, 3) 0.32; "
               "the weight's gradient is right", _PRELU_EVIDENCE, _per_channel_prelu_backward,
               "every gradient flowing back through the PReLU is wrong", fix=_PRELU_FIX),
    WrongClass(RRELU_OPS, "nn.RReLU / F.rrelu in training, its input's gradient taken",
               "the random slopes the forward applied are lost (the fallback never writes them into noise), so the "
               "input's gradient is not the slope: RReLU(0.1, 0.3) of 64 negative inputs, max |grad - slope| 0.29974, "
               "grad sum 0.0 (the CPU 12.4121); the forward's values are right", REALDML + " (re-probe 21, case 27)",
               _rrelu_in_training_under_autograd,
               "every gradient flowing back through the RReLU is wrong: where its input is negative it is whatever "
               "the fresh noise tensor's memory held (zeros on realdml there, a reused block's old values elsewhere)",
               fix=_RRELU_FIX, wrong_in_replay=False),
    WrongClass(("aten::mul.Tensor",), "the backward of amax/amin: the gradient times a bool mask",
               "the product comes back bool on DirectML (0/1), not the gradient's dtype", REALDML,
               _bool_mask_multiply_in_backward,
               "every gradient flowing back through it is zero", zeroes_gradients=True),
)

#: shipped table entries whose wrong samples differed only in an output nothing reads: not wrong results
UNREAD_ONLY = {
    "aten::nll_loss_forward": "the wrong samples all use reduction='none', and differ only in total_weight, "
                              "undefined there (CPU 0.0, DirectML the weight sum): the loss is bit-identical",
}

#: shipped table entries whose wrong samples all share an argument's value: (argument, value, in words)
ARGUMENT_CLASSES = {
    "aten::max_pool2d_with_indices": ("ceil_mode", True, "max pooling with ceil_mode=True (one output row or "
                                                         "column short: ceil_mode is ignored)"),
}


#: shipped table entries whose wrong samples are a measured class of :data:`CLASSES`: (the class's test, in words).
#: The re-measured table (random incoming gradients) flags nll_loss_backward for 3 of 4 samples: those with
#: reduction='none', whose rows' gradients differ; 'mean' and 'sum' (one incoming gradient) are right.
ENTRY_CLASSES = {
    "aten::nll_loss_backward": (_nll_loss_backward_of_unequal_rows,
                                "nll_loss_backward with reduction='none' and incoming gradients that differ between rows"),
}


def entry_class_matches(entry_class: Optional[dict], call: Call) -> Optional[bool]:
    """Whether ``call`` is in a table entry's ``wrong_class`` (None: the entry has none).

    The form the generator emits: ``{"arguments": {"ceil_mode": true}, "min_dims": 2, "max_dims": 4,
    "broadcast": true, "empty": false, "phase": "backward"}``, every key optional; a call is in the class when
    it meets every key. An ``arguments`` key needs the call's recorded arguments: a call whose recording
    kept none is not in the class (it is flagged only when it is known to be)."""
    if not isinstance(entry_class, dict) or not entry_class:
        return None
    arguments = entry_class.get("arguments")
    if isinstance(arguments, dict) and arguments:
        if call.arguments is None or any(call.arguments.get(k) != v for k, v in arguments.items()):
            return False
    first = call.shapes[0] if call.shapes else ()
    if isinstance(entry_class.get("min_dims"), int) and len(first) < entry_class["min_dims"]:
        return False
    if isinstance(entry_class.get("max_dims"), int) and len(first) > entry_class["max_dims"]:
        return False
    if isinstance(entry_class.get("broadcast"), bool):
        broadcast = len(call.shapes) >= 2 and call.shapes[0] != call.shapes[1]
        if broadcast != entry_class["broadcast"]:
            return False
    if isinstance(entry_class.get("empty"), bool):
        empty = any(0 in s for s in call.shapes)
        if empty != entry_class["empty"]:
            return False
    if isinstance(entry_class.get("phase"), str) and call.phase != entry_class["phase"]:
        return False
    return True


def table_entry_applies(op: str, entry: dict, call: Call) -> Tuple[bool, str]:
    """Whether a flagged table entry's wrong results apply to ``call``, and the class in words."""
    outputs = entry.get("wrong_outputs")
    if isinstance(outputs, list) and outputs and 0 not in outputs:
        return False, "only outputs other than the first differed"
    base = op.split(".", 1)[0] if op not in UNREAD_ONLY and op not in ARGUMENT_CLASSES and op not in ENTRY_CLASSES else op
    matched = entry_class_matches(entry.get("wrong_class"), call)
    if matched is not None:
        return matched, str(entry.get("wrong_class_text") or "")
    if not isinstance(outputs, list) and (op in UNREAD_ONLY or base in UNREAD_ONLY):
        return False, UNREAD_ONLY.get(op) or UNREAD_ONLY[base]
    if op in ENTRY_CLASSES:
        test, words = ENTRY_CLASSES[op]
        return test(call), words
    if op in ARGUMENT_CLASSES:
        name, value, words = ARGUMENT_CLASSES[op]
        return call.arguments is not None and call.arguments.get(name) == value, words
    return True, ""


def classes_for(call: Call) -> list:
    """The measured classes (:data:`CLASSES`) ``call`` falls in."""
    return [c for c in CLASSES if c.covers(call.op) and c.match(call)]


def classes_of_op(op: str) -> list:
    """Every class of ``op`` (any overload, when it names none): what ``dmlprof ops`` shows."""
    base = op if op.startswith("aten::") else f"aten::{op}"
    return [c for c in CLASSES if any(o == base or o.split(".", 1)[0] == base for o in c.ops) or c.covers(base)]


def ops_with_classes() -> frozenset:
    """Ops some class lists (the recorder points at their calls by the user's line). The in-place writes are
    not listed: they are in their class only by the arguments the recorder keeps, and it points at those calls
    by them (an in-place ReLU of every block need not look up its line)."""
    return frozenset(op for c in CLASSES for op in c.ops)


def dtypes_of(text: str) -> Tuple[str, ...]:
    return tuple(d for d in str(text).split(",") if d)


def call_of(op: str, dtypes: str, shapes: str, phase: str = "", arguments: Optional[dict] = None) -> Call:
    return Call(op, dtypes_of(dtypes), parse_shapes(shapes), phase, arguments)


def modules_below(earlier_modules: Sequence[str], module: str) -> list:
    """The modules whose forward calls ran before the culprit's (``earlier_modules``: their modules, in call
    order), other than its own module and that module's ancestors: the gradients reaching them flow through it."""
    found = []
    for name in earlier_modules:
        if name and name not in found and name != module and not module.startswith(name + "."):
            found.append(name)
    return found
