"""A target other than DirectML, predicted on the same stand-in device as ``--target dml``.

The stand-in (:mod:`dmlprof.predict.standin`) is the prediction's one path: its kernels sit where the
target's table registers the target's own, and its fallback kernel catches every op that has neither those
nor a composite kernel. What differs per target is its semantics (:mod:`dmlprof.targets`): which dtypes a
tensor may hold, which registered calls still raise, and whether an op the device lacks raises or runs on
the CPU. Nothing here names a target.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace

import torch

from dmlprof.backends.base import Backend
from dmlprof.directml.mixed_devices import CPU_TENSOR_REMEDY, cuda_like_failure
from dmlprof.predict.arguments import flat_tensors
from dmlprof.predict.autocast import TargetAutocast, target_device_type_autocasts
from dmlprof.predict.backend import PredictedDmlBackend
from dmlprof.predict.device_type import device_reads_as_target
from dmlprof.predict.standin import StandIn
from dmlprof.record.tap import op_overload
from dmlprof.targets.base import TargetFailure


def dtype_name(dtype) -> str:
    """``torch.float64`` -> ``float64``: the spelling of the target tables."""
    return str(dtype).replace("torch.", "")


#: the layouts TensorImpl calls sparse compressed (its SparseCsr key)
_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
#: device types whose strided tensors TensorImpl calls dense (c10/core/TensorImpl.h, torch 2.4 to 2.13), of those a
#: predicted program can hold beside the stand-in's (the targets' own accelerators are among them: the stand-in's
#: tensors answer as theirs); those of the first three are sparse ones too
_DENSE_DEVICES = ("cpu", "cuda", "hip", "hpu", "mtia")


def _shallow_copy_as_a_dense_device(device_type: str):
    """``torch._has_compatible_shallow_copy_type`` answered for the stand-in's tensors as for XPU's and MPS's.

    ``Module.to(device)`` keeps a parameter (setting its ``.data``) where the moved tensor is compatible with it, and
    makes a new one otherwise: weights tied on the CPU (``out.weight = emb.weight``) stay tied on XPU and MPS, whose
    strided tensors TensorImpl calls dense, as the CPU's. It never calls a PrivateUse1 tensor dense, so the
    stand-in untied them, as DirectML does (its tensors answer False too: measured on realdml) but these targets
    do not. A PrivateUse1 kernel of the op is how a backend answers it (torch's OpenReg example); the
    library returned holds it until it is destroyed."""
    dense, sparse = (*_DENSE_DEVICES, device_type), (*_DENSE_DEVICES[:3], device_type)

    def family(tensor):
        if tensor.is_nested:
            return None
        if tensor.layout == torch.strided:
            return "dense" if tensor.device.type in dense else None
        if tensor.layout == torch.sparse_coo:
            return "sparse" if tensor.device.type in sparse else None
        return "compressed" if tensor.layout in _COMPRESSED else None

    def compatible(tensor, other) -> bool:
        same_kind = (tensor.device.type, tensor.layout, tensor.is_nested) == (other.device.type, other.layout,
                                                                              other.is_nested)
        return same_kind or (family(tensor) is not None and family(tensor) == family(other))

    library = torch.library.Library("aten", "IMPL")
    for key in ("PrivateUse1", "AutogradPrivateUse1"):  # torch 2.4 leaves the autograd key without a kernel else
        library.impl("_has_compatible_shallow_copy_type", compatible, key)
    return library


class TargetStandIn(StandIn):
    """The stand-in with a target's semantics in place of DirectML's measured refusals."""

    always_failing = frozenset()
    own_dtypes: dict = {}  # the targets' devices return the CPU's dtypes (a bool dropout mask)
    storage_less = False  # MPS's and XPU's tensors have storage

    def __init__(self, semantics, log: list, device_type: str, values=None):
        self.semantics = semantics  # before StandIn's __init__, which asks for the refused dtypes
        self.deepcopy_keeps_views = semantics.deepcopy_keeps_views
        self.target_type = semantics.table.backend
        self.unfused = frozenset(semantics.unfused)  # and chooses the autograd kernels by them
        self.judged_composites = frozenset(semantics.judged_composites)
        self._theirs = dict(semantics.judged_composites)
        super().__init__(semantics.table, log, device_type, True, values)
        # where ATen picks another op on the target's device than on a PrivateUse1 one (MPS convolves with
        # _mps_convolution), the stand-in's op runs as the target's own does
        self._natives = self._natives | frozenset(semantics.stand_in_natives())
        # the target's autocast, where it has one (torch-directml has none: --target dml's refusal stays)
        self._autocast = TargetAutocast(semantics.autocast_key, device_type) if semantics.autocast_key else None

    def install(self) -> None:
        super().install()
        if self._autocast is not None:
            self._autocast.install()
        self._shallow_copy = _shallow_copy_as_a_dense_device(self.device_type)

    def refresh(self) -> None:
        super().refresh()
        if self._autocast is not None:
            self._autocast.refresh()

    def remove(self) -> None:
        if self._autocast is not None:
            self._autocast.remove()
        self._shallow_copy._destroy()
        super().remove()

    def refused_dtypes(self, float64_support: bool) -> dict:
        return self.semantics.refused_dtypes()

    def checked(self, run, name: str):
        if name not in self._natives:
            return run  # no kernel of the target's: the fallback kernel judges it (``fallback``)
        semantics = self.semantics

        def checked_run(args, kwargs):
            tensors = flat_tensors((args, tuple(kwargs.values())), [])
            why = semantics.call_failure(name, tuple(dict.fromkeys(dtype_name(t.dtype) for t in tensors)))
            if why:
                raise TargetFailure(why, name)
            foreign = _foreign_generator(args, kwargs, semantics.table.backend)
            if foreign:
                raise TargetFailure(foreign, name, _FOREIGN_GENERATOR_REMEDY)
            why = semantics.argument_failure(name, args)
            if why:
                raise TargetFailure(why, name, semantics.argument_remedy(name))
            return run(args, kwargs)
        return checked_run

    def devices_checked(self, run, overload, name: str):
        """``run``, refusing a CPU tensor beside the target's as CUDA's kernels do (XPU's and MPS's check devices
        as CUDA's: dmlprof.directml.mixed_devices.cuda_like_failure), not as torch-directml's."""
        schema, device_type, shown = overload._schema, self.device_type, self.semantics.table.backend

        def kernel(args, kwargs):
            why = cuda_like_failure(name, schema, args, kwargs, device_type, shown)
            if why:
                raise TargetFailure(why, name, CPU_TENSOR_REMEDY)
            return run(args, kwargs)
        return kernel

    def judge_composite(self, name: str, args, kwargs) -> None:
        theirs = self._theirs[name]
        if self.semantics.argument_failure(theirs, args):  # the call the device makes, recorded where it raises
            op_overload(theirs)(*args, **kwargs)

    def fallback(self, overload, name: str, args, kwargs):
        why = self.semantics.fallback_failure(name)
        if why:
            raise TargetFailure(why, name)
        return super().fallback(overload, name, args, kwargs)


def _foreign_generator(args, kwargs, device_type: str) -> str:
    """ATen's words where a random kernel of the target's is handed a generator of another device (the CPU's:
    ``torch.randn(..., generator=torch.Generator().manual_seed(0), device=x.device)``), which MPS's and XPU's
    kernels refuse (ATen's ``check_generator``; torch-directml's runs it); "" where none is."""
    from dmlprof.directml.generators import generator_device_type

    for value in tuple(args) + tuple(kwargs.values()):
        if isinstance(value, torch.Generator) and generator_device_type(value) != device_type:
            return f"Expected a '{device_type}' device type for generator but found '{generator_device_type(value)}'"
    return ""


#: what to do about it: draw on the generator's device and move the result (diffusers' randn_tensor on MPS)
_FOREIGN_GENERATOR_REMEDY = ("draw on the generator's device and move the result, torch.randn(..., generator=g)"
                             ".to(x.device), or make the generator on the device")


class PredictedTargetBackend(PredictedDmlBackend):
    """``scan --target T`` for a target with a table and a semantics module: the predicted DirectML backend's
    device, values and recording, with none of DirectML's knowledge."""

    stands_in_for_directml = False

    def __init__(self, semantics, index: int = 0, values=None):
        super().__init__(index, table=semantics.table, float64_support=True, values=values)
        self.semantics = semantics
        self.name = semantics.table.backend

    @contextmanager
    def run_context(self):
        """The stand-in's run, where ``torch.autocast("<target>")`` autocasts on the stand-in and the model's
        tensors read as the target's device (its ``x.device.type``), as does a generator made for it."""
        from dmlprof.directml.generators import device_generators_made

        with super().run_context(), target_device_type_autocasts(self.name, self.device_type), \
                device_reads_as_target(self.name, self.device()), device_generators_made(self.device_type, self.name):
            yield

    def _new_standin(self):
        return TargetStandIn(self.semantics, self.fallback_log, self.device_type, self.values)

    # DirectML's measured knowledge is not this target's
    def flagged_ops(self) -> frozenset:
        return frozenset()

    def failure_rule(self):
        return None

    def arguments_rule(self):
        return None

    def failure_in(self, exc: BaseException, touched_device: bool = True):
        return exc if isinstance(exc, TargetFailure) else None

    def known_error(self, exc: BaseException):
        if not isinstance(exc, TargetFailure):
            return self._known_off_the_target(exc)
        title = self.semantics.title
        return SimpleNamespace(key=f"{self.name}_predicted_failure", remedy=exc.remedy or self.semantics.remedy(exc.op),
                               explanation=f"{exc.message.split(' (predicted')[0]}: predicted from torch "
                                           f"{self.table.torch_version}'s {title} registrations, not measured")

    def device_name(self) -> str:
        return f"{self.table.package} {self.table.torch_version} (predicted, no device)"

    def versions(self) -> dict:
        return {"target_torch": self.table.torch_version}

    def run_meta(self):
        facts = super().run_meta()
        return replace(facts, device=replace(facts.device, float64=None))  # float64 is an adapter class of DirectML's

    def notes(self) -> tuple:
        """What the session says of this prediction's grounds (its provenance and assumed setting)."""
        return (self.semantics.provenance(),)

    def _known_off_the_target(self, exc: BaseException):
        """A known error that is not the target's failure: DirectML's words (the stand-in is a PrivateUse1 device as
        torch-directml's is) are not this target's; a sparse tensor, which the stand-in cannot hold and the target
        has kernels for (torch 2.14's SparseMPS and SparseXPU), stops the prediction without a verdict."""
        found = Backend.known_error(self, exc)
        if found is None or not found.key.startswith(_DIRECTML_KEYS):
            return found
        held = _NOT_HELD.get(found.key)
        if held is None:
            return None  # the step's own error, as the target would raise it
        kind, other_path = held
        title = self.semantics.title
        return SimpleNamespace(
            key=f"{self.name}_{found.key}_not_predicted", not_predicted=True,
            explanation=f"the prediction cannot follow a {kind} tensor (its stand-in device holds none), and torch "
                        f"registers {kind} kernels of {title}'s own: whether {title} runs this step is not predicted",
            remedy=f"scan it on the {title} device itself, or predict {other_path} for the rest")


#: the known errors that are DirectML's (dmlprof/backends/errors.py)
_DIRECTML_KEYS = ("dml_", "privateuse1_")
#: those a tensor the stand-in cannot hold meets, which the targets' devices have kernels for (torch 2.14's
#: SparseXPU, SparseMPS, NestedTensorXPU): the kind of tensor, and the path a prediction can follow instead
_NOT_HELD = {"privateuse1_sparse": ("sparse", "its dense path (sparse=False)"),
             "privateuse1_nested": ("nested", "the encoder without nested tensors (enable_nested_tensor=False)")}
