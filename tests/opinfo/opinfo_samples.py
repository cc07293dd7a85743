"""A model file whose "model" runs PyTorch's own OpInfo samples: op_db, a few samples per op, forward and backward.

The OpInfo cross-check (test_opinfo.py) runs this file through dmlprof like any
other model file: live on the emulated DirectML device, and predicted with
``--target dml``. Each sample is a child module (``OpSamples.samples.s<k>``)
holding the sample's tensors as parameters (those that require grad) and
buffers, so moving the model moves them; its forward calls the op and, where
the op supports autograd, ``torch.autograd.grad`` of its differentiable
outputs. Samples holding sparse or other non-strided tensors are left out
(torch-directml has no kernels for those layouts; one such tensor would stop
the whole model's ``.to(device)``). A sample that raises is caught and written to the status file, so one
op never stops the others.

Environment (read when the model is built):
  DMLPROF_OPINFO_SHARD     "k/n": this process runs the ops whose index in op_db is k mod n (default 0/1)
  DMLPROF_OPINFO_SAMPLES   samples per op (default 2)
  DMLPROF_OPINFO_STATUS    where forward writes {sample key: "ok" | error} as JSON
  DMLPROF_OPINFO_ONLY      comma-separated op labels (``prod``, ``max.binary``): only these (to look closer)
"""
import itertools
import json
import os
import zlib

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten

BATCH_SIZE = 1
DTYPES = (torch.float32, torch.int64, torch.bool)


def shard() -> tuple:
    k, _, n = os.environ.get("DMLPROF_OPINFO_SHARD", "0/1").partition("/")
    return int(k), int(n or 1)


def chosen_ops():
    """(index in op_db, OpInfo, dtype) for this shard's ops, in op_db's order."""
    from torch.testing._internal.common_methods_invocations import op_db

    k, n = shard()
    only = {label for label in os.environ.get("DMLPROF_OPINFO_ONLY", "").split(",") if label}
    for index, op in enumerate(op_db):
        if index % n != k or (only and op_label(op) not in only):
            continue
        supported = op.supported_dtypes("cpu")
        dtype = next((d for d in DTYPES if d in supported), None)
        if dtype is not None:
            yield index, op, dtype


def op_label(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


class Sample(nn.Module):
    """One SampleInput: its tensors as parameters/buffers, its other values kept as they are."""

    def __init__(self, op, sample):
        super().__init__()
        leaves, self.spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        self.slots = []
        for position, leaf in enumerate(leaves):
            if not isinstance(leaf, torch.Tensor):
                self.slots.append(("value", leaf))
                continue
            name = f"t{position}"
            if leaf.requires_grad and (leaf.is_floating_point() or leaf.is_complex()):
                self.register_parameter(name, nn.Parameter(leaf.detach().clone(), requires_grad=True))
            else:
                self.register_buffer(name, leaf.detach().clone())
            self.slots.append(("tensor", name))
        self.fn = op.op
        self.process = sample.output_process_fn_grad
        self.label = op_label(op)

    def forward(self):
        leaves = [getattr(self, v) if kind == "tensor" else v for kind, v in self.slots]
        inputs, args, kwargs = tree_unflatten(leaves, self.spec)
        output = self.fn(inputs, *args, **kwargs)
        wanted = [p for p in self.parameters() if p.requires_grad]
        if wanted:
            outputs = [o for o in tree_flatten(self.process(output))[0]
                       if isinstance(o, torch.Tensor) and o.requires_grad]
            if outputs:
                torch.autograd.grad(outputs, wanted, [torch.ones_like(o) for o in outputs], allow_unused=True)


def _strided(sample) -> bool:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return all(leaf.layout == torch.strided for leaf in leaves if isinstance(leaf, torch.Tensor))


class OpSamples(nn.Module):
    def __init__(self, per_op: int):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1))
        self.samples = nn.ModuleDict()
        self.labels = {}
        self.left_out = {}
        for index, op, dtype in chosen_ops():
            torch.manual_seed(zlib.crc32(op_label(op).encode()))
            requires_grad = op.supports_autograd and (dtype.is_floating_point or dtype.is_complex)
            try:
                samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=requires_grad), per_op))
            except Exception:  # the OpInfo cannot make samples on this torch: not ours to judge
                continue
            for number, sample in enumerate(samples):
                key = f"s{index}_{number}"
                if not _strided(sample):  # sparse and nested layouts: torch-directml has no kernels for them
                    self.left_out[key] = op_label(op)
                    continue
                self.samples[key] = Sample(op, sample)
                self.labels[key] = op_label(op)

    def forward(self, x):
        status = {}
        for key, sample in self.samples.items():
            try:
                sample()
                status[key] = "ok"
            except Exception as exc:
                text = str(exc).strip().splitlines()
                status[key] = f"{type(exc).__name__}: {text[0][:300] if text else ''}"
        path = os.environ.get("DMLPROF_OPINFO_STATUS")
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                json.dump({"status": status, "labels": self.labels}, handle)
        return self.anchor * x.sum()


def build_model():
    torch.manual_seed(0)
    return OpSamples(int(os.environ.get("DMLPROF_OPINFO_SAMPLES", "2")))


def make_batch(batch_size):
    return torch.zeros(batch_size), torch.zeros(batch_size)


def loss_fn(output, target):
    return output.sum()
