"""A device op's kernel run elsewhere: its arguments converted for the meta device or the CPU, its results brought back.

The stand-in device has no kernels that compute anything: each of its calls
runs another device's kernel (a Meta kernel for shapes, a CPU kernel on values
or on placeholders) on converted arguments, and the results come back as
device tensors. The conversion both ways, and the bookkeeping of values it
implies (a non-dense tensor handed over as a copy and copied back, outputs
computed without values forgotten), is one mechanism whichever kernel runs, so
it lives here; which kernel runs for which op is decided in
:mod:`dmlprof.predict.standin`.
"""
from __future__ import annotations

from typing import Optional

import torch

from dmlprof.predict.arguments import flat_tensors, written
from dmlprof.predict.husks import device_tensor, like, set_geometry
from dmlprof.predict.placeholders import placeholder
from dmlprof.predict.values import ValueStore, cpu_view, forget, has_values

#: what a kernel run elsewhere answers where it could not run (the caller then tries another way)
FAILED = object()


class Converted:
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
                    set_geometry(original, value.shape, value.stride(), value.storage_offset())
                    if self.values is not None:  # resized on fresh storage: the values resized with it
                        self.values.keep(original, value)
                return original
            if value.device.type != self.outputs_from or self.target is None:
                return value
            if self.target.type == self.device_type:
                if value.layout != torch.strided:
                    raise NotImplementedError(_no_sparse_kernel(value.layout))
                if value.is_nested:  # (strided in layout, but of no one size: the stand-in cannot shape it)
                    raise NotImplementedError(_NO_NESTED_KERNEL)
                out = like(value, self.target)
                if self.values is not None:
                    self.values.keep(out, value)
                return out
            return placeholder(value) if value.device.type == "meta" else value
        if isinstance(value, (list, tuple)):
            return type(value)(self.back(v) for v in value)
        return value


#: torch's words where a nested tensor (nn.TransformerEncoder's fast path with a padding mask) would land on a
#: device with no nested kernels: real torch-directml's, measured on realdml (re-probe 18, case 36)
_NO_NESTED_KERNEL = ("Could not run 'aten::_to_copy' with arguments from the 'NestedTensorPrivateUse1' backend. This "
                     "could be because the operator doesn't exist for this backend (predicted: torch-directml "
                     "registers no nested-tensor kernels)")


def _no_sparse_kernel(layout) -> str:
    """torch's words where a sparse result would land on a device with no sparse kernels (torch-directml's)."""
    op, key = (("aten::_sparse_coo_tensor_with_dims_and_tensors", "SparsePrivateUse1") if layout == torch.sparse_coo
               else ("aten::_sparse_compressed_tensor_unsafe", "SparseCsrPrivateUse1"))
    return (f"Could not run '{op}' with arguments from the '{key}' backend. This could be because the operator "
            "doesn't exist for this backend (predicted: torch-directml registers no sparse kernels)")


def rewrapped(args: tuple, slots: tuple, store: ValueStore) -> tuple:
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


# -- values handed to a CPU kernel, and what it wrote ------------------------------------------
def given_values(store: ValueStore, tensor: torch.Tensor) -> bool:
    """Whether a device tensor about to be written has values, or can be given fresh ones: it is all of its
    storage, or its storage holds what ``torch.empty`` made (arbitrary bytes) or a constant."""
    if has_values(tensor) or store.materialize(tensor) is None:
        return True
    if not store.covers_storage(tensor):
        return False  # a part of a storage whose other values are unknown
    with torch._C._DisableTorchDispatch():
        fresh = torch.empty(tuple(tensor.shape), dtype=tensor.dtype)
    return store.keep(tensor, fresh) is None


def as_fallback_hands_it(tensor: torch.Tensor, copies: list) -> torch.Tensor:
    """A device tensor's values as the CPU fallback hands them to a kernel (see ``StandIn.on_values``);
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


def a_copy_of(tensor: torch.Tensor) -> torch.Tensor:
    """A device tensor's values as a CPU copy no write reaches them from (torch's CPU fallback copies an argument its
    schema does not mark as written, and never copies it back: dmlprof.directml.unmarked_writes)."""
    with torch._C._DisableTorchDispatch():
        return cpu_view(tensor).clone()


def copy_back_written(overload, args, kwargs, copies: list, also: tuple = ()) -> None:
    """What a kernel wrote into copies of non-dense device tensors, copied back into their values
    (a copy the kernel resized became the tensor's values already). ``also``: tensors the kernel writes
    though the schema does not say so, whose writes the device keeps."""
    written_ids = {id(t) for t in flat_tensors((written(overload, args, kwargs), also), [])}
    for copy, original in copies:
        if id(original) in written_ids and tuple(copy.shape) == tuple(original.shape):
            with torch._C._DisableTorchDispatch():
                cpu_view(original).copy_(copy)


def forget_written(overload, args, kwargs, out, why: str, also: tuple = ()) -> None:
    """An op ran without values: its outputs and the tensors it wrote have none, ``why`` (``also``: as in
    ``copy_back_written``)."""
    for tensor in flat_tensors((out, written(overload, args, kwargs), also), []):
        if tensor.device.type not in ("cpu", "meta"):
            forget(tensor, why)
