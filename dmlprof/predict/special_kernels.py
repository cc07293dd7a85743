"""The stand-in's kernels whose work is not a shape computation: copies, values read back, comparisons, fills.

Most of the stand-in's kernels are one generic kernel (:class:`dmlprof.predict.standin.StandIn`:
values where it has them, else shapes). These ops are not: a copy moves
values (or a constant) between the host and the device, a read-back or a
comparison answers with a Python value that must be known or made up, a fill
sets a constant, ``set_`` swaps storage, and DirectML's own convolutions have
no kernel of torch's to compute their shapes. Each is written here once, and
the stand-in routes its op here through :data:`SPECIAL` and :data:`ANSWERED`.

Each kernel takes ``(standin, overload, args, kwargs)``: the installed
``StandIn``, whose generic paths (``compute``, ``shapes_only``,
``with_cpu_layout``, ``on_values``, ``why_no_values``, ``made_up``, ``values``)
it builds on. The stand-in is handed in rather than imported, so that this
table sits below the class that routes to it.
"""
from __future__ import annotations

from typing import Optional

import torch

from dmlprof.directml.output_dtypes import OUTPUT_IN_INPUT_DTYPE
from dmlprof.predict.arguments import flat_tensors
from dmlprof.predict.conversion import FAILED, given_values
from dmlprof.predict.husks import META, META_KEYS, device_tensor
from dmlprof.predict.placeholders import MATCHES_NOTHING, value_of
from dmlprof.predict.values import (
    WHY_EMPTY, WHY_META, constant_of, cpu_view, forget, has_values, set_constant, unknown_why)
from dmlprof.record.frame import op_name


def _empty(standin, overload, args, kwargs):
    # Arbitrary bytes, on the device as on the CPU: no values are kept until something writes them
    # (a model moved with to_empty() holds none: 7 billion parameters built on meta cost no memory).
    return standin.shapes_only(overload, args, kwargs, WHY_EMPTY)


def _host_values(tensor: torch.Tensor) -> Optional[torch.Tensor]:
    """A tensor's values as a CPU tensor (itself on the host, its values on the device), or None."""
    if tensor.device.type == "cpu":
        return tensor
    return cpu_view(tensor) if tensor.device.type != "meta" and has_values(tensor) else None


def _why_unknown(tensor: torch.Tensor) -> str:
    return WHY_META if tensor.device.type == "meta" else unknown_why(tensor)


def _copy_into(standin, destination: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    values = _host_values(source) if isinstance(source, torch.Tensor) else None
    if destination.device.type != standin.device_type:  # read back to the host: the values, a constant, else zeros
        with torch._C._DisableTorchDispatch():
            if values is not None:
                return destination.copy_(values)
            value = value_of(source)
            if value is None:
                standin.made_up("aten::copy_", _why_unknown(source))
            return destination.fill_(value) if value is not None else destination.zero_()
    if values is not None and given_values(standin.values, destination):
        with torch._C._DisableTorchDispatch():
            cpu_view(destination).copy_(values)
    else:
        why = unknown_why(destination) if values is not None else _why_unknown(source)
        set_constant(destination, value_of(source), why)
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


def _on_values_if_known(standin, overload, args, kwargs):
    """The op's answer computed on values, or ``FAILED`` where an argument has none."""
    if standin.why_no_values(args, kwargs, overload) is not None:
        return FAILED
    return standin.on_values(overload, args, kwargs)


def _first_unknown_why(args) -> str:
    """Why the first argument without values has none (a sentence)."""
    unknown = [t for t in flat_tensors(args, []) if t.device.type != "cpu" and _host_values(t) is None]
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
    if found is not FAILED:
        return found
    # A comparison of values nobody has: "not equal", as a bool read gives False. ATen's
    # is_scalar_tensor_true(t) is equal(t, ones): its guarded edge cases (istft's window check,
    # cov's non-positive normalisation) are then not taken, as they are not on real data.
    standin.made_up("aten::equal", _first_unknown_why(args))
    return False


def _allclose(standin, overload, args, kwargs):
    found = _on_values_if_known(standin, overload, args, kwargs)
    if found is not FAILED:
        return found
    # Checks written TORCH_CHECK(allclose(...)) (linalg.eig's backward) pass, as on real data. Every
    # op inside torch's composite runs on the device (no fallback to miss); only its answer is made up.
    standin.made_up("aten::allclose", _first_unknown_why(args))
    return True


def _fill(standin, overload, args, kwargs):
    out = standin.compute(overload, args, kwargs)
    if not has_values(out):
        set_constant(out, 0 if op_name(overload) == "aten::zero_" else value_of(args[1]), unknown_why(out))
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
    other = value_of(args[1]) if known is not None and op_name(overload).startswith("aten::eq.") else None
    set_constant(out, (known == other) if other is not None else None, unknown_why(out))
    tested = args[0] if args else kwargs.get("self")
    if isinstance(out, torch.Tensor) and isinstance(tested, torch.Tensor) and (
            tested.is_floating_point() or tested.is_complex()):
        setattr(out, MATCHES_NOTHING, True)  # kept with the tensor while C++ holds it (PyObject preservation)
    return out


def _set_(standin, overload, args, kwargs):
    # Storage-level: the tensor takes another device tensor's (memoryless) storage; Meta's kernel
    # does exactly the bookkeeping, on the device tensor itself.
    return overload.redispatch(META_KEYS, *args, **kwargs)


def _convolution_overrideable(standin, overload, args, kwargs):
    (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups) = args
    out = standin.compute(torch.ops.aten.convolution.default,
                          (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups), {})
    wanted = _cpu_convolution_layout(input, weight)
    if wanted is None or out.is_contiguous(memory_format=wanted):
        return out
    laid_out = torch.empty(out.shape, dtype=out.dtype, device=META, memory_format=wanted)
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


def _output_in_input_dtype(standin, overload, args, kwargs):
    """An output torch-directml returns in its first argument's dtype where the CPU's and Meta's kernels return
    another (native_dropout's mask: float 0 and 1, not bool): :data:`dmlprof.directml.output_dtypes.
    OUTPUT_IN_INPUT_DTYPE`, the definition the emulated device's kernel reads too. Autograd hands the mask to
    native_dropout_backward, so a real step's backward is (float32, float32), never (bool, float32)."""
    outputs = list(standin.compute(overload, args, kwargs))
    index, dtype = OUTPUT_IN_INPUT_DTYPE[op_name(overload)], args[0].dtype
    made = outputs[index]
    if made.dtype == dtype:
        return tuple(outputs)
    cast = device_tensor(made.shape, made.stride(), 0, dtype, made.device)
    if has_values(made):
        with torch._C._DisableTorchDispatch():
            values = torch.empty_strided(tuple(made.shape), tuple(made.stride()), dtype=dtype)
            values.copy_(cpu_view(made))
        standin.values.keep(cast, values)
    elif constant_of(made) is not None:
        set_constant(cast, float(constant_of(made)), unknown_why(made))
    else:
        forget(cast, unknown_why(made))
    outputs[index] = cast
    return tuple(outputs)


SPECIAL = {
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
#: Composite ops whose whole answer is a value read from the device: answered here, in one call,
#: instead of by torch's composite reading placeholder values.
ANSWERED = {"aten::allclose": _allclose}
#: Device kernels whose outputs newer torch's Meta kernels lay out otherwise than the CPU kernel the
#: device's results follow (what later calls do depends on it: a view or a copy, a gradient accumulated
#: in place or copied to the parameter's layout).
CPU_LAYOUT = frozenset({"aten::native_layer_norm_backward"})
#: Kernels of torch-directml's that return other dtypes than the CPU's: the DirectML stand-in's only (the other
#: targets' devices return the CPU's bool dropout mask).
DIRECTML_DTYPES = dict.fromkeys(OUTPUT_IN_INPUT_DTYPE, _output_in_input_dtype)
