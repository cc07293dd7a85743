"""The samples of the DirectML truth table: PyTorch's OpInfo database, a few samples per op and dtype.

Shared by the measuring worker (on real torch-directml, ``truth_worker.py``) and by the checks that
replay the same samples on the prediction and on the emulated device (``tests/opinfo/test_truth.py``):
each sample is named by a key, ``label|dtype|number``, and rebuilt from it deterministically (the
random inputs are seeded from the key), so every path runs the same inputs.

Dtypes: float32 forward and backward (where the op supports autograd); float16, int64, bool and
complex64 forward only, each where the op's CPU kernels support it.
"""
from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

DTYPES = {"float32": torch.float32, "float16": torch.float16, "int64": torch.int64, "bool": torch.bool,
          "complex64": torch.complex64}
#: the dtype whose samples also run backward
GRAD_DTYPE = "float32"


def op_label(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _ops() -> dict:
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_label(op): op for op in op_db}


_OPS: Optional[dict] = None


def ops() -> dict:
    global _OPS
    if _OPS is None:
        _OPS = _ops()
    return _OPS


@dataclass
class Sample:
    """One OpInfo sample, its tensors on the CPU, ready to be moved and run."""

    key: str
    label: str
    dtype: str
    backward: bool
    run: Callable  # run(device, between=None) -> (output, gradients of the inputs that require grad)
    leaves: list


#: samples per op, by dtype: an op's first sample is often its empty or smallest case (``eye(0)``
#: runs where ``eye(3)`` ends the process), so float32 takes three; complex64 takes one (no complex
#: tensor can exist on the device at all)
SAMPLES_PER_OP = {"float32": 3, "float16": 2, "int64": 2, "bool": 2, "complex64": 1}


def keys(samples_per_op: Optional[dict] = None, dtypes=tuple(DTYPES), only: frozenset = frozenset()) -> Iterator[str]:
    """Every sample key, in op_db's order (samples an op cannot make on this torch are left out)."""
    counts = {**SAMPLES_PER_OP, **(samples_per_op or {})}
    for label, op in ops().items():
        if only and label not in only:
            continue
        supported = op.supported_dtypes("cpu")
        for dtype_name in dtypes:
            if DTYPES[dtype_name] not in supported:
                continue
            for number, sample in enumerate(_samples(op, label, dtype_name, counts[dtype_name])):
                if _strided(sample):
                    yield f"{label}|{dtype_name}|{number}"


def _seed(label: str, dtype_name: str) -> int:
    return zlib.crc32(f"{label}|{dtype_name}".encode())


def _wants_grad(op, dtype_name: str) -> bool:
    return dtype_name == GRAD_DTYPE and bool(op.supports_autograd)


def _samples(op, label: str, dtype_name: str, count: int) -> list:
    torch.manual_seed(_seed(label, dtype_name))
    try:
        return list(itertools.islice(op.sample_inputs("cpu", DTYPES[dtype_name],
                                                       requires_grad=_wants_grad(op, dtype_name)), count))
    except Exception:  # the OpInfo cannot make samples on this torch: nothing to judge
        return []


def _strided(sample) -> bool:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return all(leaf.layout == torch.strided for leaf in leaves if isinstance(leaf, torch.Tensor))


# -- probes: calls users make that OpInfo's first samples miss ------------------------------------------
def _probe_inputs(label: str) -> list:
    torch.manual_seed(_seed(label, "float32"))
    return [torch.randn(2, 3, 8, 8, requires_grad=True)]


def _interpolate(mode: str, **options):
    return lambda x: torch.nn.functional.interpolate(x, mode=mode, **options)


def _scatter_add_repeated(x):
    index = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]).to(x.device).view(1, 1, 8, 1).expand(2, 3, 8, 8)
    return torch.zeros(2, 3, 8, 8, device=x.device).scatter_add(2, index, x)


def _scatter_add_longer_index(x):  # an index longer than self along dim: allowed by torch
    index = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]).to(x.device).view(1, 1, 8, 1).expand(2, 3, 8, 8)
    return torch.zeros(2, 3, 4, 8, device=x.device).scatter_add(2, index, x)


#: probe label -> the call, on a (2, 3, 8, 8) float32 input that requires grad; run forward and backward
PROBES = {
    "probe.interpolate.bilinear_x2": _interpolate("bilinear", scale_factor=2, align_corners=False),
    "probe.interpolate.bilinear_x2_align_corners": _interpolate("bilinear", scale_factor=2, align_corners=True),
    "probe.interpolate.bilinear_to_size": _interpolate("bilinear", size=(5, 11), align_corners=False),
    "probe.interpolate.bicubic_x2": _interpolate("bicubic", scale_factor=2, align_corners=False),
    "probe.interpolate.nearest_x2": _interpolate("nearest", scale_factor=2),
    "probe.scatter_add_repeated_indices": _scatter_add_repeated,
    "probe.scatter_add_index_longer_than_self": _scatter_add_longer_index,
}


def probe_keys() -> list:
    return [f"{label}|float32|0" for label in PROBES]


def _probe(key: str, incoming: str) -> Sample:
    label = key.split("|")[0]
    leaves = _probe_inputs(label)
    call = PROBES[label]

    def run(device, between=None):
        moved = [leaf.detach().to(device).requires_grad_() for leaf in leaves]
        output = call(*moved)
        if between is not None:
            between(output)
        grads = torch.autograd.grad([output], moved, incoming_gradients(key, [output], incoming))
        return output, list(grads)

    return Sample(key, label, "float32", True, run, leaves)


def incoming_gradients(key: str, outputs: list, incoming: str = "random") -> list:
    """Random incoming gradients, seeded from the sample's key (the same on every device): all-ones ones hide
    backward kernels that give every row the first row's gradient (``nll_loss_backward(reduction="none")``)."""
    if incoming == "ones":
        return [torch.ones_like(o) for o in outputs]
    import numpy

    # numpy draws them: a torch call would be recorded as one of the sample's own calls
    generator = numpy.random.default_rng(zlib.crc32(f"grad|{key}".encode()))
    return [torch.from_numpy(generator.standard_normal(tuple(o.shape)).astype("float32")).to(device=o.device,
                                                                                          dtype=o.dtype)
            for o in outputs]


#: how a backward sample's incoming gradients are made: "random" (seeded from the key; the generator since
#: format 2) or "ones" (the first table's samples: their recorded calls have ``ones_like``)
INCOMING = ("random", "ones")


def sample(key: str, incoming: str = "random") -> Sample:
    """The sample named ``key`` (``label|dtype|number``), rebuilt."""
    if incoming not in INCOMING:
        raise ValueError(f"incoming gradients are one of {INCOMING}, not {incoming!r}")
    if key.startswith("probe."):
        return _probe(key, incoming)
    label, dtype_name, number = key.split("|")
    op = ops()[label]
    found = _samples(op, label, dtype_name, int(number) + 1)[int(number)]
    leaves, spec = tree_flatten((found.input, found.args, found.kwargs))
    backward = _wants_grad(op, dtype_name)

    def run(device, between=None):
        """``(output, gradients)``: the op's output and, for a backward sample, the gradients of its inputs
        (None where unused); ``between(output)`` is called after the forward, before the backward."""
        moved = [leaf.detach().to(device).requires_grad_(leaf.requires_grad) if isinstance(leaf, torch.Tensor)
                 else leaf for leaf in leaves]
        inputs, args, kwargs = tree_unflatten(moved, spec)
        if "device" in kwargs:  # a factory's samples name the CPU: make it on the device under test
            kwargs = {**kwargs, "device": device}
        output = op.op(inputs, *args, **kwargs)
        if between is not None:
            between(output)
        wanted = [t for t in moved if isinstance(t, torch.Tensor) and t.requires_grad]
        grads: list = []
        if backward and wanted:
            outs = [o for o in tree_flatten(found.output_process_fn_grad(output))[0]
                    if isinstance(o, torch.Tensor) and o.requires_grad]
            if outs:
                grads = list(torch.autograd.grad(outs, wanted, incoming_gradients(key, outs, incoming), allow_unused=True))
        return output, grads

    return Sample(key, label, dtype_name, backward, run, leaves)


def to_cpu(value):
    """Outputs of a run, on the CPU (for comparing a device's results with the CPU's)."""
    return tree_map(lambda x: x.detach().to("cpu") if isinstance(x, torch.Tensor) else x, value)
