"""The ``torch.<device>`` module a one-device PrivateUse1 backend registers.

torch asks it about availability, the current device, seeds and AMP dtypes
(``torch._register_device_module``). Both of dmlprof's own stand-ins (the
emulated DirectML device and the predictor's device) keep their tensors in
host memory or in none, so nothing is ever queued and random numbers are the
CPU's.
"""
from __future__ import annotations

import types

import torch


def host_device_module(module_name: str, device_type: str, device_name: str, *, seeds_cpu: bool) -> types.ModuleType:
    """A module answering for one always-available device.

    ``seeds_cpu``: seeding it seeds (and its RNG state is) the CPU generator,
    for a device whose random ops really run on the CPU; otherwise seeding is a no-op.
    """
    mod = types.ModuleType(module_name)
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: 0
    mod.set_device = lambda device: None
    mod.is_initialized = lambda: True
    mod._lazy_init = lambda: None
    mod._is_in_bad_fork = lambda: False
    mod.synchronize = lambda device=None: None  # nothing is ever queued
    mod.device_name = lambda device=None: device_name
    mod.manual_seed = (lambda seed: torch.manual_seed(seed) and None) if seeds_cpu else (lambda seed: None)
    mod.manual_seed_all = lambda seed: None  # one device: manual_seed covered it
    mod.seed = lambda: None
    mod.seed_all = lambda: None
    mod.initial_seed = lambda: torch.initial_seed()
    mod.get_rng_state = lambda device=device_type: torch.get_rng_state()
    mod.set_rng_state = (lambda state, device=device_type: torch.set_rng_state(state)) if seeds_cpu else (
        lambda state, device=device_type: None)
    mod.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16]
    # torch.load(map_location=<the device>) selects the device with it (torch.serialization's
    # _privateuse1_deserialize): the one device is always the current one
    mod.device = _OneDevice
    return mod


class _OneDevice:
    """``with <module>.device(index):`` on a host of one device: nothing to switch."""

    def __init__(self, index=None):
        self.index = index

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


def backward_on_calling_thread():
    """Context for runs on a stand-in device: the autograd engine runs backward on the calling thread.

    The engine sizes its per-device worker queues once per process, at the
    first backward; one that ran before the stand-in device existed (any CPU
    backward) left none for ``privateuseone``, and a device node would then
    fail an internal assert looking for its queue. The ops are the same either way.
    """
    return torch.autograd.set_multithreading_enabled(False)


#: the op whose kernel :func:`contiguous_as_on_directml` is, on the device's autograd key (torch-directml's tensors
#: answer it so; the stand-ins' tensors, plain strided ones, would not)
CONTIGUOUS_OP = "aten::contiguous"


def contiguous_as_on_directml(tensor: torch.Tensor, memory_format=torch.contiguous_format) -> torch.Tensor:
    """``x.contiguous(memory_format=...)`` as torch-directml answers it: its tensors (an OpaqueTensorImpl) say they
    are contiguous in every layout when they are in the default one, so a contiguous tensor comes back as it is,
    whatever layout is asked (measured on realdml: ``x.contiguous(memory_format=torch.channels_last)`` keeps
    strides (18, 6, 3, 1) and runs; ``x.clone(memory_format=torch.channels_last)`` raises). Any other tensor is
    cloned in the asked layout, as torch's composite does."""
    if memory_format == torch.preserve_format:  # torch's own refusal, in its own words
        return torch.ops.aten.contiguous.default.decompose(tensor, memory_format=memory_format)
    if tensor.is_contiguous():
        return tensor
    return tensor.clone(memory_format=memory_format)


#: torch-directml's words where anything asks for the storage of one of its tensors (an OpaqueTensorImpl)
NO_STORAGE = "Cannot access storage of OpaqueTensorImpl"


def fakes_as_on_directml(device_type: str, *, emulated: bool) -> None:
    """Dynamo's fake tensors of ``device_type``'s tensors, as torch-directml's: none (re-probe 13, case 11).

    torch.compile makes a fake tensor of every tensor it traces, and the fake reads the tensor's storage, which
    torch-directml's tensors lack: measured on realdml (torch 2.4.1 + torch-directml 0.2.5), ``NotImplementedError:
    Cannot access storage of OpaqueTensorImpl`` there, so no backend compiles for DirectML. Dynamo graph-breaks
    where the tensor is an input of the compiled frame (a compiled Linear's forward runs eagerly) and raises
    InternalTorchDynamoError in those words where the frame makes one (inductor, aot_eager and eager alike).

    ``emulated``: the device's tensors have storage (without this Inductor would try, and fail on
    ``privateuseone``), so the describer raises torch-directml's error where torch calls ``untyped_storage()``:
    Dynamo meets it where it meets torch-directml's. Fake and meta tensors, and the wrapped kinds whose storage
    torch does not read, are as they were. On either device, once Dynamo meets a device tensor, it leaves
    dmlprof's own Python alone (:func:`_dmlprof_untraced`)."""
    from torch._subclasses import meta_utils
    from torch._subclasses.fake_tensor import FakeTensor

    describer = meta_utils.MetaTensorDescriber
    describe_tensor = describer.describe_tensor
    if getattr(describe_tensor, "fakes_as_on_directml", False):
        return

    def describe_tensor_as_on_directml(self, t, *args, **kwargs):
        if t.device.type == device_type and not isinstance(t, FakeTensor):
            _dmlprof_untraced()  # Dynamo is at work (imported, then: importing it costs seconds, so this waits)
            if (emulated and t.layout == torch.strided and not t.is_nested
                    and not meta_utils.is_traceable_wrapper_subclass(t)
                    and not meta_utils.is_functorch_wrapped_tensor(t) and not meta_utils.is_legacy_batchedtensor(t)):
                raise NotImplementedError(NO_STORAGE)
        return describe_tensor(self, t, *args, **kwargs)

    describe_tensor_as_on_directml.fakes_as_on_directml = True
    describer.describe_tensor = describe_tensor_as_on_directml


def _dmlprof_untraced() -> None:
    """Dynamo leaves dmlprof's own Python alone (the ``--from cuda`` remap's torch function mode, the emulated
    device's failure rules and its kernels written in Python), as it would in the script run without dmlprof: after
    a graph break, a call made eagerly inside the compiled region enters them, and Dynamo would trace them as new
    frames and fail at their DirectML tensors (measured: a compiled Linear that runs on realdml failed in a
    ``--device dml --from cuda`` scan, in remap.py's ``__torch_function__``)."""
    from importlib.util import find_spec

    from torch._dynamo import trace_rules

    package = find_spec("dmlprof").origin  # as trace_rules.add reads it: a folder's __init__.py
    if package[:-len("__init__.py")] not in trace_rules.SKIP_DIRS:
        trace_rules.add("dmlprof")
