"""Replays call signatures on real torch-directml, one JSON event per line (``scan --confirm``'s worker).

    python -m dmlprof.confirm.worker SIGNATURES VALUES KEYS_FILE

Run in a process of its own by :mod:`dmlprof.confirm.replay` (torch-directml ends its process on some calls),
under the events protocol of :mod:`dmlprof.confirm.supervisor`. Each signature's tensors are rebuilt on the
CPU (its values where the prediction had them, else seeded random floats and zero indices), moved to the
device with the signature's strides, and the call made there, nothing intercepting it; the fallback warnings
torch-directml raises say whether it ran on the device. dmlprof's verifier then recomputes it on the CPU from
the same inputs and compares (its tolerances, and the outputs it leaves out: random draws, uninitialised
memory, views, indices among equal values). A health probe follows every call: a removed device fails every
later call under its own op's name.
"""
from __future__ import annotations

import json
import os
import sys
import warnings
import zlib
from collections import Counter
from pathlib import Path

import torch

from dmlprof.confirm.signatures import DEVICE, decode, load
from dmlprof.verify.verifier import SKIP_REASONS

def probe_device(device) -> tuple:
    """``(healthy, message)``: a tiny known computation on the device, checked. A removed device
    (DXGI_ERROR_DEVICE_REMOVED) fails every later call, each with its own op's name on it."""
    try:
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        got = ((x.to(device) * 2 + 1).sum(0)).to("cpu")
        expected = (x * 2 + 1).sum(0)
        if torch.equal(got, expected):
            return True, ""
        return False, f"probe computed {got.tolist()}, expected {expected.tolist()}"
    except Exception as exc:
        return False, describe(exc)


def describe(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:400] if lines else ''}"


def overload(name: str):
    """The OpOverload named ``aten::add.Tensor`` (``aten::relu`` is the default overload)."""
    namespace, _, rest = name.partition("::")
    packet, _, which = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), which or "default")


def _cpu_tensor(described: dict, values: bytes, seed: int) -> torch.Tensor:
    """The tensor a signature names, on the CPU, with its strides and storage offset."""
    dtype = getattr(torch, described["dtype"])
    shape, stride, offset = described["shape"], described["stride"], described["offset"]
    logical = None
    if described.get("values") is not None:
        start, nbytes = described["values"]
        logical = torch.frombuffer(bytearray(values[start:start + nbytes]), dtype=torch.uint8).view(dtype).reshape(shape)
    elif dtype.is_floating_point:
        generator = torch.Generator().manual_seed(seed)
        logical = torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
    elif dtype == torch.bool:
        generator = torch.Generator().manual_seed(seed)
        logical = torch.rand(shape, generator=generator) > 0.5
    else:  # an index or a target whose values the prediction did not have: 0 is a valid one anywhere
        logical = torch.zeros(shape, dtype=dtype)
    if any(s == 0 for s in shape) or not shape:
        return logical.clone()
    extent = offset + sum((size - 1) * step for size, step in zip(shape, stride)) + 1
    base = torch.zeros(extent, dtype=dtype)
    strided = base.as_strided(shape, stride, offset)
    try:
        strided.copy_(logical)
    except RuntimeError:  # overlapping memory (an expanded tensor): its values as one contiguous tensor
        return logical.clone()
    return strided


def _device_tensor(cpu: torch.Tensor, device) -> torch.Tensor:
    """``cpu`` on the device, as a view with the same strides where it is one (a transposed weight)."""
    if cpu.is_contiguous() or cpu.dim() == 0:
        return cpu.to(device)
    base = torch.as_strided(cpu, (cpu.untyped_storage().nbytes() // cpu.element_size(),), (1,), 0)
    try:
        return base.to(device).as_strided(cpu.shape, cpu.stride(), cpu.storage_offset())
    except RuntimeError:
        return cpu.to(device)


# Calls func inside a fresh C++ warning handler (as the recorder does): torch-directml's fallback warning
# reaches Python when this call returns (called plainly from Python it goes to stderr, uncaught)
_call_flushing_warnings = torch._C._disabled_torch_function_impl


def _call_catching(func, args, kwargs):
    """``(result, None)`` or ``(None, exception)`` of the call as the recorder's tap makes it (below autograd,
    where the signature was recorded; an in-place or out= result that torch-directml hands back in a tensor of
    its own lands in the caller's argument): called plainly from Python, ``arange`` gives an empty tensor and
    ``masked_fill_`` writes nothing on real torch-directml, which the program's own call never does. No Python
    error may be pending when the handler flushes its warnings."""
    from dmlprof.record.tap import call_as_dispatched

    try:
        return call_as_dispatched(func, args, kwargs), None
    except Exception as exc:
        return None, exc


def _fallbacks(caught) -> list:
    from dmlprof.backends.base import FALLBACK_WARNING

    found = []
    for warning in caught:
        match = FALLBACK_WARNING.search(str(warning.message))
        if match is not None and match.group("op") not in found:
            found.append(match.group("op"))
    return found


#: ops that sum over a dimension their output keeps, and where that dimension is: (matrix argument, its dim) or
#: ("dim", the argument holding it). The verifier estimates the terms an output element sums as its largest
#: input over its output, which is 1 here (an mm's output can be larger than its inputs), and its tolerance
#: then takes a sum over 50257 vocabulary entries for an elementwise op
_HIDDEN_SUMS = {"aten::mm": (0, -1), "aten::addmm": (1, -1), "aten::bmm": (0, -1), "aten::baddbmm": (1, -1),
                "aten::_softmax_backward_data": ("dim", 2), "aten::_log_softmax_backward_data": ("dim", 2)}


def _terms(op: str, args: list, out) -> int:
    """Terms summed per output element times the output's elements (the verifier's scale), 0 where unknown."""
    where = _HIDDEN_SUMS.get(op)
    first = out[0] if isinstance(out, (list, tuple)) and out else out
    if where is None or not isinstance(first, torch.Tensor) or len(args) <= max(where[1], 0):
        return 0
    if where[0] == "dim":
        source, dim = args[0], args[where[1]]
        terms = source.shape[dim] if isinstance(source, torch.Tensor) and isinstance(dim, int) and source.dim() else 1
    else:
        matrix = args[where[0]]
        terms = matrix.shape[where[1]] if isinstance(matrix, torch.Tensor) and matrix.dim() else 1
    return int(terms) * first.numel()


def replay(signature: dict, values: bytes, backend, verifier) -> dict:
    """What real torch-directml does with one signature: ``{"outcome": "device"|"fallback"|"raises", ...}``."""
    op = signature["op"]
    func = overload(op)
    seed = zlib.crc32(json.dumps([op, signature["tensors"]], sort_keys=True).encode())
    device = backend.device()
    cpu = [_cpu_tensor(described, values, seed + i) for i, described in enumerate(signature["tensors"])]
    try:
        on_device = [_device_tensor(t, device) if described["device"] == DEVICE else t
                     for t, described in zip(cpu, signature["tensors"])]
    except Exception as exc:
        return {"outcome": "raises", "message": "moving its inputs to the device: " + describe(exc)}
    args = [decode(a, on_device, device) for a in signature["args"]]
    kwargs = {k: decode(v, on_device, device) for k, v in signature["kwargs"].items()}
    skipped_before, divergent_before = Counter(verifier.skipped), len(verifier.divergent)
    pending = verifier.before(func, args, kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch._C._AutoDispatchBelowADInplaceOrView():
            out, failed = _call_flushing_warnings(_call_catching, (), (func, args, kwargs), {})
        if failed is None:
            try:
                backend.synchronize([t for t in (out if isinstance(out, (list, tuple)) else (out,))
                                     if isinstance(t, torch.Tensor)])
            except Exception as exc:  # the device failed running the call: the read back is where it tells
                failed = exc
        if failed is not None:
            return {"outcome": "raises", "message": describe(failed), "fallback_ops": _fallbacks(caught)}
    fallback_ops = _fallbacks(caught)
    result = {"outcome": "fallback" if fallback_ops else "device", "fallback_ops": fallback_ops}
    if pending is None:
        skipped = [reason for (_, reason) in (verifier.skipped - skipped_before)]
        result["values"] = "not compared" + (f" ({SKIP_REASONS.get(skipped[0], skipped[0])})" if skipped else "")
        return result
    pending.scale = max(pending.scale, _terms(op, args, out))
    verifier.after(pending, args, kwargs, out, step=0, phase="", module="", source="-", seq=0)
    found = verifier.divergent[divergent_before:]
    result["values"] = "compared"
    if found:
        worst = found[-1]
        result.update(wrong=True, max_abs_error=worst["max_abs_error"], reason=worst["reason"], what=worst["what"])
    else:
        result["wrong"] = False
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signatures_path, values_path, keys_path = argv[:3]
    # events alone on stdout: whatever torch or the driver prints goes to stderr
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(event: dict) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    from dmlprof.backends.dml import DmlBackend
    from dmlprof.verify import Verifier

    torch.set_warn_always(True)  # every fallback warns, not only the first of the process
    signatures = load(Path(signatures_path))
    values = Path(values_path).read_bytes()
    keys = [k for k in Path(keys_path).read_text(encoding="utf-8").split() if k]
    backend = DmlBackend(0)
    backend.prepare()
    device = backend.device()
    healthy, message = probe_device(device)
    emit({"probe": healthy, "message": message, "after": "start"})
    if not healthy:
        return 3
    emit({"adapter": backend.device_name()})
    verifier = Verifier(backend)
    for key in keys:
        signature = signatures[key]
        emit({"start": key})
        emit({"phase": "device"})
        emit({"call": signature["op"], "dtypes": sorted({t["dtype"] for t in signature["tensors"]})})
        try:
            result = replay(signature, values, backend, verifier)
        except Exception as exc:  # the replay's own trouble with this signature: said, not hidden
            result = {"outcome": "harness_error", "message": describe(exc)}
        healthy, message = probe_device(device)
        emit({"probe": healthy, "message": message, "after": "device"})
        if not healthy:
            emit({"done": key, "outcome": "unhealthy", "message": message, "error": result.get("message")})
            return 3
        emit({"done": key, **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
