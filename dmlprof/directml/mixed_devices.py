"""A CPU tensor handed to a device kernel beside device tensors: which calls torch-directml takes, which it refuses.

torch-directml's own kernels unbox every tensor argument as a DirectML tensor and fail an internal assert on a CPU one
("unbox expects Dml at::Tensor as inputs"), a 0-d one included; some ATen kernels it runs check devices first, in
ATen's words ("Expected all tensors to be on the same device", ``where``'s own). Its CPU fallback takes CPU tensors
(it moves the device ones to the CPU). Measured on real torch-directml 0.2.5 (torch 2.4.1), one tensor argument at a
time moved to the CPU, n-d and 0-d, over every OpInfo op's first samples, forward and backward
(tools/mixed_device_survey.py; the result: :mod:`dmlprof.directml.mixed_devices_measured`). The rule: a call of one
of torch-directml's kernels with a CPU tensor argument beside a device tensor fails as measured, unless measured
accepted; an overload the survey did not reach is judged by its measured siblings (``add.out`` by ``add.Tensor``), and
one with none is refused if it is torch-directml's own kernel (the assert is the kernels' rule; the exceptions are
few: TensorIterator's 0-d scalars, ``mm``'s second matrix, a LayerNorm's affine weights, ``index``'s indices, ...)
and taken if it reaches the fallback. Copies between devices are what they are for. Both devices standing in for DirectML (the prediction's stand-in, the emulated device) ask this.
"""
from __future__ import annotations

from typing import Iterator, Optional

import torch

from dmlprof.directml.mixed_devices_measured import MEASURED

#: torch-directml's internal assert on a CPU tensor handed to its kernel (DMLTensor.cpp, its exact words)
UNBOX_MESSAGE = ('tensor.device().type() == at::DeviceType::PrivateUse1 INTERNAL ASSERT FAILED at '
                 '"/__w/1/s/pytorch-directml-plugin/torch_directml/csrc/dml/DMLTensor.cpp":30, please report a bug '
                 'to PyTorch. unbox expects Dml at::Tensor as inputs')
SAME_DEVICE_MESSAGE = "Expected all tensors to be on the same device, but found at least two devices, {} and {}!"
WHERE_MESSAGE = ("Expected condition, x and y to be on the same device, but condition is on {} and x and y are on {} "
                 "and {} respectively")
#: what to change, said with each such refusal
CPU_TENSOR_REMEDY = ("make the tensor on the model's device (device=x.device, or register it as a buffer so "
                     "Module.to moves it)")
#: a measured verdict: taken; refused with torch-directml's assert, ATen's same-device words or where's
ACCEPT, UNBOX, SAME_DEVICE, WHERE, ABORTS_ON_UNBOX = "accept", "unbox", "same_device", "where", "aborts"

#: calls that move values between devices (copy_, .to()): a CPU tensor beside a device one is their purpose
COPIES = frozenset({"aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::_to_copy",
                    "aten::to.device", "aten::to.dtype_layout", "aten::to.other", "aten::set_.source_Storage",
                    "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor"})


def base_name(name: str) -> str:
    """``aten::add_.Tensor`` -> ``aten::add``: the family an overload's siblings share."""
    return name.split(".", 1)[0].rstrip("_")


def _by_family() -> dict:
    family: dict = {}
    for name, arguments in MEASURED.items():
        for argument, kinds in arguments.items():
            for kind, verdict in kinds.items():
                family.setdefault(base_name(name), {}).setdefault(argument, {}).setdefault(kind, set()).add(verdict)
    return family


_FAMILY = _by_family()


#: ops the survey cannot see (it watches the calls a program makes; these are made inside another op's kernel) judged
#: by the op whose kernel calls them with the same arguments: index_put's (CompositeExplicit) is _index_put_impl_
MEASURED_AS = {"aten::_index_put_impl_": "aten::index_put"}


def verdict_for(name: str, argument: str, kind: str, native: bool = True) -> str:
    """What torch-directml does with a CPU tensor (``kind``: "0d" or "nd") as ``argument`` of ``name``, an op of
    its own kernels (``native``) or of its CPU fallback (which takes CPU tensors: measured where surveyed)."""
    name = MEASURED_AS.get(name, name)
    measured = MEASURED.get(name, {}).get(argument, {}).get(kind)
    if measured is not None:
        return measured
    siblings = _FAMILY.get(base_name(name), {}).get(argument, {}).get(kind, set())
    if ACCEPT in siblings:
        return ACCEPT
    return next(iter(sorted(siblings)), UNBOX if native else ACCEPT)


def tensor_arguments(schema, args, kwargs) -> Iterator[tuple]:
    """``(argument name, tensor)`` for each tensor a call is given, a list's items named ``name[]`` (the survey's)."""
    for index, argument in enumerate(schema.arguments):
        if argument.name in kwargs:
            value = kwargs[argument.name]
        elif index < len(args) and not argument.kwarg_only:
            value = args[index]
        else:
            continue
        if isinstance(value, torch.Tensor):
            yield argument.name, value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield f"{argument.name}[]", item


def _two_devices(given: list) -> list:
    """The first two devices among a call's tensors, in argument order (ATen names them so)."""
    return list(dict.fromkeys(str(tensor.device) for _, tensor in given))[:2]


def _words(verdict: str, given: list) -> str:
    if verdict == WHERE and len(given) == 3:
        return WHERE_MESSAGE.format(*(str(tensor.device) for _, tensor in given))
    if verdict == SAME_DEVICE:
        return SAME_DEVICE_MESSAGE.format(*_two_devices(given))
    if verdict in (UNBOX, ABORTS_ON_UNBOX, WHERE):
        return UNBOX_MESSAGE
    return verdict  # another first line measured (its own words)


def mixed_device_failure(name: str, schema, args, kwargs, device_type: str, native: bool):
    """How a call of ``name`` on the device (one of torch-directml's kernels where ``native``, else its fallback)
    fails for a CPU tensor among its arguments, or None (see the module docstring). A
    :class:`~dmlprof.directml.failures.Failure`."""
    from dmlprof.directml.failures import ABORTS, RAISES, Failure

    if name in COPIES:
        return None
    given = list(tensor_arguments(schema, args, kwargs))
    if not any(tensor.device.type == device_type for _, tensor in given):
        return None
    for argument, tensor in given:
        if tensor.device.type != "cpu":
            continue
        verdict = verdict_for(name, argument, "0d" if tensor.dim() == 0 else "nd", native)
        if verdict == ACCEPT:
            continue
        words = _words(verdict, given)
        if verdict == ABORTS_ON_UNBOX:
            return Failure(ABORTS, words, "SIGABRT")
        return Failure(RAISES, words)
    return None


def indexless_failure(name: str, schema, args, kwargs, device_type: str) -> Optional[str]:
    """An index-less device tensor ("privateuseone", made on ``x.device.type``) beside one on "privateuseone:0",
    where the kernel checks its tensors share a device (as it checks a CPU one: ATen's words, or where's): the
    error's text, else None. The emulated device has its CPU kernel judge such a pair; this says the same."""
    given = [(argument, tensor) for argument, tensor in tensor_arguments(schema, args, kwargs)
             if tensor.device.type == device_type]
    if len({tensor.device.index is None for _, tensor in given}) < 2:
        return None
    verdicts = {verdict_for(name, argument, "nd") for argument, _ in given}
    checked = WHERE if WHERE in verdicts else SAME_DEVICE if SAME_DEVICE in verdicts else None
    return None if checked is None else _words(checked, given)


#: where a CUDA-like device (XPU, MPS: their kernels check devices as CUDA's do) takes a CPU tensor of any size
CUDA_LIKE_TAKES = frozenset({("aten::index.Tensor", "indices[]"), ("aten::index_put_", "indices[]"),
                             ("aten::index_put", "indices[]"), ("aten::_index_put_impl_", "indices[]")})


def cuda_like_failure(name: str, schema, args, kwargs, device_type: str, shown: str) -> Optional[str]:
    """The error a device whose kernels check devices as CUDA's do raises for a CPU tensor beside its own, else
    None: every tensor argument but a 0-d one of a TensorIterator op (taken as a scalar; an op the DirectML survey
    saw refuse an n-d CPU tensor in TensorIterator's words) and an index's CPU indices. Read from torch's kernels,
    not measured on XPU or MPS. ``shown``: the device's name as the target's users see it ("xpu")."""
    if name in COPIES:
        return None
    given = list(tensor_arguments(schema, args, kwargs))
    device = next((tensor.device for _, tensor in given if tensor.device.type == device_type), None)
    if device is None:
        return None
    for argument, tensor in given:
        if tensor.device.type != "cpu" or (name, argument) in CUDA_LIKE_TAKES:
            continue
        if tensor.dim() == 0 and verdict_for(name, argument, "nd") == SAME_DEVICE:
            continue
        return SAME_DEVICE_MESSAGE.format(f"{shown}:{device.index or 0}", tensor.device)
    return None
