"""Which ``torch.compile``d calls fail on torch-directml, as a prediction of DirectML says (re-probe 20, case 1).

While a prediction runs Dynamo is off (:mod:`dmlprof.predict.compiled`), so on its own a compiled call always runs
as its eager calls. On torch-directml (0.2.5, torch 2.4.1) most do not run at all. Measured on realdml: Dynamo makes
a fake tensor of each tensor it traces, and the fake reads the tensor's storage, which torch-directml's tensors do
not have. So the first call of a compiled *function*, or of a compiled module of the model's own classes, that
finds a device tensor among its arguments, its module's parameters and buffers, or the closure cells and globals
its code names raises ``InternalTorchDynamoError: Cannot access storage of OpaqueTensorImpl`` (inductor, aot_eager
and eager backends alike; ``mode=``, ``dynamic=``, ``fullgraph=``, ``@torch.compile`` as a decorator,
``Module.compile()``, ``torch._dynamo.optimize``, a function compiled on CPU tensors then called with device
ones), unless ``torch._dynamo.config.suppress_errors`` is set, when it runs eagerly. Only a module made wholly of
``torch.nn``'s own classes (``nn.Sequential`` of torch.nn layers, ``nn.Linear``, ``nn.TransformerEncoderLayer``)
runs, eagerly: Dynamo skips torch.nn's code and graph-breaks where a device tensor is a built-in module's
argument, before faking it (unless a forward hook of the model's runs in it: Dynamo traces the hook; not torch's own
hooks, ``weight_norm``'s, ``prune``'s, nor one the model wrapped in ``torch.compiler.disable``: re-probe 22, cases 2
and 3); with ``fullgraph=True`` that graph break raises ``Unsupported`` instead. A module whose forward the model
wrapped in ``torch.compiler.disable`` runs wholly eagerly, as torch.nn's do. A compiled optimizer step fails: Dynamo
fakes the parameters and state the optimizer holds (case 6). Dynamo turned off by the model
(``torch._dynamo.config.disable``) runs every compiled call eagerly. A function
of CPU tensors runs, even where it moves its result to the device inside (``a.to(device)``: Dynamo fakes the CPU
tensor, never a device one).

Not told apart (the prediction runs them, or fails them, unlike realdml): a device tensor reached only through an
attribute or another function (``self.weight`` of an object that is not the module compiled), which fails there;
a module of the model's own class whose forward meets its device tensors only as the arguments of torch.nn modules
called in a loop (Dynamo skips the whole frame at a graph break inside a loop), which runs there.
``torch._dynamo.optimize(backend)(fn)`` (the older spelling) is told apart as ``torch.compile`` is.

The emulated DirectML device's runs meet Dynamo itself, which fails at a device tensor as torch-directml's does; on
torch 2.5+, whose Dynamo inlines torch.nn's modules, they take this rule for a torch.nn-only module
(:func:`torch_nn_modules_skipped_as_on_directml`; re-probe 21, case 8). Here, not in :mod:`dmlprof.predict`, so
that both may use it.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Callable, Optional

import torch
from torch.utils import _pytree

from dmlprof.directml.device_module import NO_STORAGE

#: the graph break Dynamo raises under ``fullgraph=True`` where a device tensor is a torch.nn module's argument
#: (realdml's words), and what lies behind it
FULLGRAPH_BREAK = ("call_function args: LazyVariableTracker() (fullgraph=True: Dynamo could not make a fake tensor "
                   f"of a torch-directml tensor, {NO_STORAGE})")


def failing_as_on_directml(compiled, original, fullgraph: bool, device_type: str,
                           disabled_by_the_model: Callable[[], bool] = lambda: False):
    """``compiled`` (what ``torch.compile`` returned for ``original``), raising torch-directml's Dynamo error at a
    call that finds a tensor of ``device_type`` (:func:`_holds`), unless the compiled module runs there or Dynamo
    is off by the model's own hand (``disabled_by_the_model()``: ``torch._dynamo.config.disable`` set before it
    compiled; the prediction turns Dynamo off itself, so the setting is read where it was before)."""
    if original is None or compiled is original:  # torch.compile(backend=...): the decorator, compiled again later
        return compiled
    module = _module_of(original)
    if isinstance(compiled, torch.nn.Module):  # an OptimizedModule: Dynamo set its forward on the instance
        compiled.forward = _refusing(compiled.forward, original, module, device_type, fullgraph,
                                     disabled_by_the_model)
        return compiled
    return _refusing(compiled, original, module, device_type, fullgraph, disabled_by_the_model)


def _module_of(original) -> Optional[torch.nn.Module]:
    """The module compiled: ``original`` itself, or the module of a bound method (``Module.compile()`` compiles
    ``self._call_impl``; ``torch.compile(model.forward)``)."""
    if isinstance(original, torch.nn.Module):
        return original
    owner = getattr(original, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def _made_of_torch_nn(module: torch.nn.Module) -> bool:
    """Whether every module whose code Dynamo would reach in it is one of torch.nn's own classes (whose code Dynamo
    does not trace as a frame), or kept from Dynamo by the model (re-probe 22, case 3: a forward it
    ``torch.compiler.disable``d runs wholly eagerly, measured on realdml)."""
    return all(type(each).__module__.startswith("torch.nn.") or _kept_from_dynamo(each.forward)
               for each in _modules_dynamo_reaches(module))


def _modules_dynamo_reaches(module: torch.nn.Module):
    """``module`` and its submodules, but not those inside a forward kept from Dynamo: Dynamo traces nothing that
    runs under a disabled function (it turns its frame callback off for the call), hooks included."""
    yield module
    if _kept_from_dynamo(module.forward):
        return
    for child in module.children():
        yield from _modules_dynamo_reaches(child)


def _kept_from_dynamo(function) -> bool:
    """Whether ``function`` is wrapped by ``torch.compiler.disable`` / ``torch._dynamo.disable`` (the mark
    ``_torchdynamo_disable`` on the wrapper, torch 2.4.1 to 2.13; a bound method reads its function's)."""
    return bool(getattr(function, "_torchdynamo_disable", False))


def _forward_hooked(module: torch.nn.Module) -> bool:
    """Whether a forward hook or forward pre-hook of the model's runs in it (on any of its modules Dynamo reaches,
    or a global forward hook): Dynamo traces the hook's frame, and the call fails as a module of the model's own
    classes does (measured on realdml: an ``nn.Sequential`` with a forward hook, a pre-hook, or a global forward
    hook fails; with a backward or state-dict hook, or a global forward pre-hook, it runs). Not the model's
    (:func:`_traced_hook`): torch's own hooks, those kept from Dynamo, and dmlprof's."""
    from torch.nn.modules import module as torch_module

    for each in _modules_dynamo_reaches(module):
        if each is not module and any(not _is_of(_module_of_hook(hook), "dmlprof")
                                      for hook in each._forward_hooks.values()):
            return True  # an inner forward hook: Dynamo inlines the call, whatever the hook
        if any(_traced_hook(hook) for hook in list(each._forward_hooks.values()) +
               list(each._forward_pre_hooks.values())):
            return True
    return any(_traced_hook(hook) for hook in torch_module._global_forward_hooks.values())


def _traced_hook(hook) -> bool:
    """Whether Dynamo traces ``hook``'s frame: not where its code is torch's (re-probe 22, case 2, measured on
    realdml: ``weight_norm``, ``spectral_norm`` and ``prune``'s pre-hooks, objects of torch.nn.utils' classes, run as
    torch.nn's modules do: Dynamo skips torch's files), nor where the model kept it from Dynamo (case 3); dmlprof's
    own global hooks are not the model's either (a run on the device has none). A forward hook (not a pre-hook) on
    a module inside the one compiled counts whatever its code (:func:`_forward_hooked`): measured on realdml, a
    ``torch.compiler.disable``d forward hook on an ``nn.Sequential``'s Linear fails there (Dynamo inlines the
    Linear's call for its hooks and fakes its weight), on the Sequential itself or as the Linear's pre-hook it runs."""
    module = _module_of_hook(hook)
    return not (_is_of(module, "torch") or _is_of(module, "dmlprof") or _kept_from_dynamo(hook))


def _module_of_hook(hook) -> str:
    """The module a hook's code is in: a function's (or bound method's), else a callable object's class's."""
    function = hook if hasattr(hook, "__code__") or hasattr(hook, "__func__") else type(hook)
    return getattr(function, "__module__", None) or ""


def _is_of(module: str, package: str) -> bool:
    """Whether the module named is ``package`` or in it (a model file's module is named ``dmlprof_model_...``: not
    dmlprof's)."""
    return module == package or module.startswith(package + ".")


def _error_at_the_call(module: Optional[torch.nn.Module], fullgraph: bool) -> Optional[Callable]:
    """What a call that finds a device tensor raises there, or None where it runs (eagerly): a module made wholly
    of torch.nn's classes, with no forward hook of the model's in it (read at the call: a hook may come later)."""
    if module is not None and _made_of_torch_nn(module) and not _forward_hooked(module):
        return _fullgraph_break if fullgraph else None  # Dynamo skips torch.nn's frames (measured)
    return _no_fake_tensor


def _refusing(call: Callable, original, module, device_type: str, fullgraph: bool,
              disabled_by_the_model: Callable[[], bool]) -> Callable:
    @functools.wraps(call)
    def compiled_call_as_on_directml(*args, **kwargs):
        error = None if _errors_suppressed() or disabled_by_the_model() else _error_at_the_call(module, fullgraph)
        if error is not None:
            held = (args, kwargs, _named_by_code(original), _tensors_of(getattr(original, "__self__", None)))
            if _holds(device_type, held) or (module is not None and _module_holds(device_type, module)):
                raise error()  # at the first call, before anything runs: Dynamo traces first
        return call(*args, **kwargs)

    return compiled_call_as_on_directml


def _errors_suppressed() -> bool:
    """``torch._dynamo.config.suppress_errors``: Dynamo's error then leaves the call to run eagerly (measured on
    realdml: a compiled function of device tensors runs)."""
    from torch._dynamo import config

    return bool(getattr(config, "suppress_errors", False))


def _named_by_code(function) -> list:
    """The tensors a function's code reads from its closure cells and globals (Dynamo fakes those it meets as it
    does its arguments: measured, ``lambda a: a.to(dml) * w`` with a device ``w`` fails), through the modules,
    optimizers and bound methods there (:func:`_tensors_of`)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return []
    found = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            continue
    names = getattr(function, "__globals__", {})
    found.extend(names[name] for name in code.co_names if name in names)
    return [tensor for each in found for tensor in _tensors_of(each)]


def _tensors_of(found) -> list:
    """The tensors Dynamo fakes when compiled code meets ``found``: a tensor; a module's parameters and buffers; an
    optimizer's parameters and state (re-probe 22, case 6, measured on realdml: ``torch.compile(opt.step)`` and a
    compiled function calling ``opt.step()`` raise at the first step); a bound method's object's (``opt.step``)."""
    if isinstance(found, torch.Tensor):
        return [found]
    if isinstance(found, torch.nn.Module):
        return list(found.parameters()) + list(found.buffers())
    if isinstance(found, torch.optim.Optimizer):
        return [leaf for leaf in _pytree.tree_leaves((found.param_groups, list(found.state.values())))
                if isinstance(leaf, torch.Tensor)]
    owner = getattr(found, "__self__", None)  # a bound method (of a module, an optimizer): what it reads
    return _tensors_of(owner) if owner is not None and hasattr(found, "__func__") else []


def _holds(device_type: str, tree) -> bool:
    """Whether a tensor of ``device_type`` is among ``tree``'s leaves, or an optimizer's there (an argument)."""
    leaves = _pytree.tree_leaves(tree)
    tensors = [tensor for leaf in leaves if isinstance(leaf, (torch.Tensor, torch.optim.Optimizer))
               for tensor in _tensors_of(leaf)]
    return any(tensor.device.type == device_type for tensor in tensors)


def _module_holds(device_type: str, module: torch.nn.Module) -> bool:
    tensors = list(module.parameters()) + list(module.buffers())
    return any(tensor.device.type == device_type for tensor in tensors)


def _no_fake_tensor() -> Exception:
    from torch._dynamo.exc import InternalTorchDynamoError

    return InternalTorchDynamoError(NO_STORAGE)


def _fullgraph_break() -> Exception:
    from torch._dynamo.exc import Unsupported

    return Unsupported(FULLGRAPH_BREAK)


@contextmanager
def torch_nn_modules_skipped_as_on_directml(device_type: str):
    """While it lasts (the emulated device's runs), a compiled module made wholly of torch.nn's classes, with no
    forward hook of the model's, runs eagerly at a call that finds a ``device_type`` tensor (``fullgraph=True``:
    raises Dynamo's graph break), as torch 2.4.1's Dynamo (torch-directml's) leaves it: it skips torch.nn's frames.
    Dynamo from torch 2.5 on inlines them (``inline_inbuilt_nn_modules``, a no-op setting by 2.13) and fakes their
    parameters, which the emulated device refuses as torch-directml would: an ``nn.Sequential`` realdml runs failed
    there (re-probe 21, case 8). Every other compiled call is left to Dynamo, which fails it as on realdml."""
    if torch.__version__ < "2.5":  # torch-directml's own Dynamo: nothing to change
        yield
        return
    compile_original = torch.compile

    def compile_as_on_directml(*args, **kwargs):
        compiled = compile_original(*args, **kwargs)
        original = args[0] if args else kwargs.get("model")
        return _torch_nn_skipped(compiled, original, bool(kwargs.get("fullgraph")), device_type)

    compile_as_on_directml.__wrapped__ = compile_original
    torch.compile = compile_as_on_directml
    try:
        yield
    finally:
        torch.compile = compile_original


def _torch_nn_skipped(compiled, original, fullgraph: bool, device_type: str):
    module = _module_of(original) if original is not None and compiled is not original else None
    if module is None:  # a function (Dynamo fails it as on realdml), or torch.compile(backend=...)'s decorator
        return compiled
    if isinstance(compiled, torch.nn.Module):  # an OptimizedModule: Dynamo set its forward on the instance
        compiled.forward = _eager_where_skipped(compiled.forward, original, module, device_type, fullgraph)
        return compiled
    return _eager_where_skipped(compiled, original, module, device_type, fullgraph)


def _eager_where_skipped(call: Callable, original, module: torch.nn.Module, device_type: str,
                         fullgraph: bool) -> Callable:
    @functools.wraps(call)
    def compiled_call_as_on_directml(*args, **kwargs):
        skipped = _made_of_torch_nn(module) and not _forward_hooked(module)  # read at the call: a hook may come later
        if not skipped or not (_holds(device_type, (args, kwargs)) or _module_holds(device_type, module)):
            return call(*args, **kwargs)  # Dynamo's, as torch 2.4.1's
        if fullgraph and not (_errors_suppressed() or _dynamo_disabled()):
            raise _fullgraph_break()
        return original(*args, **kwargs)  # eagerly, hooks and all, as Dynamo runs a frame it skips

    return compiled_call_as_on_directml


def _dynamo_disabled() -> bool:
    from torch._dynamo import config

    return bool(getattr(config, "disable", False))
