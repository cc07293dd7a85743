"""The distinct call signatures of a predicted step, kept to be replayed on real torch-directml (scan --confirm).

The recorder hands every recorded call to :class:`SignatureCapture` before it runs (its inputs as the call
sees them: an in-place call has not written yet). A signature is the op overload, each tensor's dtype,
shape, strides, storage offset and device, and every other argument's value (dims, flags, scalars, dtypes);
two calls with the same signature are one row, with both calls' rows. The first call of a signature also
keeps the values its tensors hold, where the prediction has them (integer and bool tensors first: indices
and targets decide what a call computes, random floats rarely do), within :data:`MAX_VALUE_BYTES`.

Written as JSON (the signatures) and one file of raw bytes (the values), never pickle: a worker in another
process, maybe on another torch, reads them back (:func:`load`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Optional

import torch

#: a tensor's values are kept up to this many bytes (integer and bool tensors), float ones up to the second
#: (a GPT-2's logits: 2 x 128 x 50257 float32 is 51 MB; random values in their place overflow a softmax's backward)
MAX_INDEX_VALUE_BYTES = 64 << 20
MAX_FLOAT_VALUE_BYTES = 64 << 20
#: the most bytes of values kept for one step
MAX_VALUE_BYTES = 512 << 20
#: the device's name in a signature (the stand-in's ``privateuseone``, real torch-directml's own)
DEVICE = "device"


#: the ops a replaying worker has (it imports torch and torch-directml, never the model file nor its libraries)
_REPLAYED_NAMESPACES = frozenset({"aten", "prims"})


class Unreplayable(Exception):
    """An argument no worker can rebuild (a generator, a Python object)."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class SignatureCapture:
    """``capture(func, args, kwargs, row)``: called by the recorder before each recorded call runs.

    ``read_values(tensor)``: the tensor's values on the CPU, or None where the prediction has none."""

    def __init__(self, read_values: Callable, device_type: str):
        self.read_values = read_values
        self.device_type = device_type
        #: key -> {"op", "args", "kwargs", "tensors", "rows"}, in first-seen order
        self.signatures: dict = {}
        self.unreplayable: dict = {}  # op -> why, for calls whose arguments cannot be rebuilt
        self._values = bytearray()

    def __call__(self, func, args, kwargs, row: int) -> None:
        op = func.name() if hasattr(func, "name") else str(func)
        namespace = op.partition("::")[0]
        if namespace not in _REPLAYED_NAMESPACES:  # a custom op the model or a library defined at its import
            self.unreplayable.setdefault(op, f"an op of {namespace}, which the model or a library it imports "
                                             "defines: a replaying worker has torch's own ops only")
            return
        try:
            tensors: list = []
            encoded = ([self._encode(a, tensors) for a in args], {k: self._encode(v, tensors) for k, v in kwargs.items()})
        except Unreplayable as why:
            self.unreplayable.setdefault(op, str(why))
            return
        described_all = [described for described, _ in tensors]
        if not any(described["device"] == DEVICE for described in described_all) and not self._names_device(encoded):
            return  # the CPU's own call: nothing of it is DirectML's
        key = json.dumps([op, encoded, described_all], sort_keys=True)
        found = self.signatures.get(key)
        if found is None:
            for described, tensor in tensors:
                described["values"] = self._keep_values(tensor)
            found = self.signatures[key] = {"op": op, "args": encoded[0], "kwargs": encoded[1], "tensors": described_all,
                                            "rows": []}
        found["rows"].append(int(row))

    def _names_device(self, encoded) -> bool:
        return f'"device": "{DEVICE}"' in json.dumps(encoded)

    def _encode(self, value, tensors: list):
        if isinstance(value, torch.Tensor):
            device = DEVICE if value.device.type == self.device_type else value.device.type
            if device not in (DEVICE, "cpu"):
                raise Unreplayable(f"a tensor on {value.device}")
            tensors.append(({"dtype": _dtype_name(value.dtype), "shape": list(value.shape),
                             "stride": list(value.stride()), "offset": int(value.storage_offset()),
                             "device": device}, value))
            return {"tensor": len(tensors) - 1}
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"float": repr(value)}
        if isinstance(value, torch.dtype):
            return {"dtype": _dtype_name(value)}
        if isinstance(value, torch.device):
            return {"device": DEVICE if value.type == self.device_type else value.type}
        if isinstance(value, torch.memory_format):
            return {"memory_format": str(value).replace("torch.", "")}
        if isinstance(value, torch.layout):
            return {"layout": str(value).replace("torch.", "")}
        if isinstance(value, (list, tuple)):
            return {"list": [self._encode(item, tensors) for item in value]}
        if isinstance(value, torch.SymInt):
            return int(value)
        raise Unreplayable(f"an argument of type {type(value).__name__}")

    def _keep_values(self, tensor: torch.Tensor) -> Optional[list]:
        """``[offset, nbytes]`` of the tensor's values (contiguous, in its dtype) in the values file, or None."""
        nbytes = tensor.numel() * tensor.element_size()
        index_like = not (tensor.is_floating_point() or tensor.is_complex())
        limit = MAX_INDEX_VALUE_BYTES if index_like else MAX_FLOAT_VALUE_BYTES
        if nbytes > limit or len(self._values) + nbytes > MAX_VALUE_BYTES:
            return None
        try:
            held = self.read_values(tensor)
        except Exception:  # a value the prediction cannot read is one it does not have
            return None
        if held is None or tuple(held.shape) != tuple(tensor.shape) or held.dtype != tensor.dtype:
            return None
        raw = held.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        offset = len(self._values)
        self._values += raw
        return [offset, len(raw)]

    def rows(self) -> list:
        """The signatures, in first-seen order, each with its index as ``key``."""
        return [{"key": str(index), **found} for index, found in enumerate(self.signatures.values())]

    def save(self, folder: Path) -> tuple:
        """(signatures file, values file) written in ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        signatures, values = folder / "signatures.json", folder / "values.bin"
        signatures.write_text(json.dumps({"format": 1, "signatures": self.rows()}), encoding="utf-8")
        values.write_bytes(bytes(self._values))
        return signatures, values


def load(signatures: Path) -> dict:
    """key -> signature, as :meth:`SignatureCapture.save` wrote them."""
    document = json.loads(Path(signatures).read_text(encoding="utf-8"))
    return {found["key"]: found for found in document["signatures"]}


def decode(value, tensors: list, device):
    """An argument as the call takes it: ``tensors`` are the rebuilt tensors by index, ``device`` stands for the
    signature's device (real torch-directml's, or the CPU for the reference)."""
    if isinstance(value, dict):
        if "tensor" in value:
            return tensors[value["tensor"]]
        if "list" in value:
            return [decode(item, tensors, device) for item in value["list"]]
        if "float" in value:
            return float(value["float"])
        if "dtype" in value:
            return getattr(torch, value["dtype"])
        if "device" in value:
            return device if value["device"] == DEVICE else torch.device(value["device"])
        if "memory_format" in value:
            return getattr(torch, value["memory_format"])
        if "layout" in value:
            return getattr(torch, value["layout"])
    return value
