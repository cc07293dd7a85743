"""Find the ops whose CPU kernels write a tensor argument their schema does not mark as written.

    PYTHONPATH=. python tools/unmarked_writes_survey.py [--skip sgn]

torch's CPU fallback copies back only the arguments a schema marks (``Tensor(a!)``), so such a write is lost on a
device whose kernel is the fallback and must be kept where the device has a kernel of its own: the definition both
devices standing in for DirectML read is dmlprof/directml/unmarked_writes.py. Every OpInfo sample of this torch
(float32, forward and, where differentiable, backward; the first 6 of each) runs on the CPU under a dispatch mode that
compares each unmarked tensor argument of every aten call before and after it. Prints ``{op: [arguments]}``.

Measured (re-probe 20, 4): torch 2.13: native_batch_norm (running_mean, running_var); torch 2.4.1: the same and
rrelu_with_noise (noise, which 2.6 on marks). Also reported, and not such writes: ``clone`` and ``_conj`` of a
conjugate view (the clone taken for the comparison resolves the view) and an in-place op reaching its out= form with
``out=self`` (``addmm.out``, ``mul.out``). ``batch_norm_update_stats`` has no OpInfo: read from its kernel
(Normalization.cpp). The ``sgn`` samples end the process (SIGSEGV) on torch 2.13: skip them.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

SAMPLES_PER_OP = 6


class UnmarkedWrites(TorchDispatchMode):
    """Records, for each aten call, the tensor arguments its schema does not mark that changed during the call."""

    def __init__(self, found: dict):
        super().__init__()
        self.found = found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        before = [(name, tensor, tensor.clone()) for name, tensor in _unmarked_tensors(func, args, kwargs)]
        out = func(*args, **kwargs)
        for name, tensor, old in before:
            if tensor.shape != old.shape or not torch.equal(torch.nan_to_num(tensor), torch.nan_to_num(old)):
                self.found.setdefault(str(func), set()).add(name)
        return out


def _unmarked_tensors(func, args, kwargs):
    for index, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            continue
        value = kwargs.get(argument.name) if argument.name in kwargs else (args[index] if index < len(args) else None)
        for tensor in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided and tensor.numel():
                yield argument.name, tensor


def survey(skip: set) -> dict:
    from torch.testing._internal.common_methods_invocations import op_db

    found: dict = {}
    for info in op_db:
        if info.name in skip:
            continue
        for backward in (False, True):
            try:
                samples = list(info.sample_inputs("cpu", torch.float32,
                                                  requires_grad=backward and info.supports_autograd))
            except Exception:  # noqa: BLE001 - an OpInfo without float32 samples
                continue
            for sample in samples[:SAMPLES_PER_OP]:
                try:
                    with UnmarkedWrites(found):
                        out = info.op(sample.input, *sample.args, **sample.kwargs)
                        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
                        if backward and outs:
                            sum(o.float().sum() for o in outs).backward()
                except Exception:  # noqa: BLE001 - a sample the op refuses
                    pass
    return {op: sorted(names) for op, names in sorted(found.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", default="sgn", help="OpInfo names to leave out, comma-separated")
    options = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(json.dumps(survey(set(filter(None, options.skip.split(",")))), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
