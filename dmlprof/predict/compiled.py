"""``torch.compile`` under a prediction: the compiled code is predicted as the eager calls it makes (re-probe 14, case 14).

A prediction's tensors are stand-ins (``privateuseone`` with meta storage); Dynamo fakes them and Inductor then
lowers for a device it cannot build code for: measured, a compiled ``Sequential`` predicted for any target ended in
"InductorError: LoweringException: AssertionError" (torch 2.13; torch 2.4.1: "BackendCompilerFailed"), and that
failure read as the model's (exit 3). No real device would fail so: Inductor compiles for XPU (Triton) and MPS
(Metal), and torch-directml's tensors cannot be faked at all: a compiled module of torch.nn's own classes runs
eagerly there, and most other compiled calls fail, as the prediction then says
(:mod:`dmlprof.directml.compiled_on_directml`; measured on realdml, torch 2.4.1). So while a prediction runs, Dynamo
traces nothing (``torch._dynamo.config.disable``, read at every frame it would trace, on torch 2.4.1 and later): a
compiled module or function runs its Python as written, its ops reach the stand-in one by one, and the session says
so in a note. The compiled object stays what ``torch.compile`` returned (an ``OptimizedModule`` keeps its
``_orig_mod.`` state-dict keys).

``torch.compile`` itself is wrapped for the prediction rather than Dynamo's configuration set beforehand: importing
``torch._dynamo`` takes seconds, and a model that compiles nothing should not pay them; the wrapper also tells whether
anything was compiled, which is when the note is due. ``torch._dynamo.optimize`` (the spelling before
``torch.compile``, still in older repositories) never calls ``torch.compile`` (re-probe 15, case 24: "InductorError:
KeyError: 'privateuseone'"), so it is wrapped the same way: now, where Dynamo is imported already, else as Dynamo is
imported (an import hook on ``torch._dynamo`` alone, removed when the prediction ends).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from importlib.abc import MetaPathFinder
from typing import Optional

import torch

#: Dynamo's module, whose ``optimize`` a prediction wraps as it wraps ``torch.compile``
DYNAMO = "torch._dynamo"
#: the backend both compile with where none is named, the one that compiles kernels of its own
INDUCTOR = "inductor"


class CompiledAsEager:
    """What :func:`compiled_code_runs_eagerly` saw: whether the model compiled anything."""

    def __init__(self, storage_less_device: Optional[str] = None):
        self.compiled = False
        #: the device type whose tensors Dynamo cannot fake (torch-directml's), where the prediction is DirectML's
        self.storage_less_device = storage_less_device
        #: the backends it compiled with, by name ("inductor", "aot_eager"; a callable of the script's: its name)
        self.backends: set = set()

    def note(self, device: str) -> str:
        """The session's note, for a prediction of ``device`` (its title: DirectML, XPU, MPS)."""
        if device == "DirectML":
            happens = ("as torch-directml runs those that run there: Dynamo cannot make fake tensors of its tensors "
                       "(no storage), so only a compiled module made wholly of torch.nn's own classes (nn.Sequential "
                       "of torch.nn layers) runs, eagerly; a compiled function, or module of the model's own "
                       "classes, taking or returning device tensors raises InternalTorchDynamoError there, and the "
                       "prediction fails it (measured, torch 2.4.1)")
        else:
            happens = "as it runs uncompiled: " + "; ".join(self._what_backends_run(device))
        return f"torch.compile: the compiled code was predicted as its eager calls, {happens}"

    def _what_backends_run(self, device: str) -> list:
        """For each kind of backend compiled with, whether the calls listed are those it runs on ``device``."""
        said = []
        if INDUCTOR in self.backends:
            said.append(f"on {device} Inductor compiles it into kernels of its own, whose calls are not those "
                        f"listed (the prediction cannot build {device} code)")
        others = sorted(self.backends - {INDUCTOR})
        if others:
            names = ", ".join(others) + (" backends run" if len(others) > 1 else " backend runs")
            said.append(f"the {names} ATen's calls, as listed (where a backend is the script's own, what it runs "
                        "is its own)")
        return said


@contextmanager
def compiled_code_runs_eagerly(storage_less_device: Optional[str] = None):
    """While it lasts, whatever is compiled (``torch.compile``, ``torch._dynamo.optimize``) runs eagerly (Dynamo
    off); yields a :class:`CompiledAsEager`. ``storage_less_device``: torch-directml's device type, where a
    ``torch.compile``d call fails as it does there (:mod:`dmlprof.directml.compiled_on_directml`)."""
    seen = CompiledAsEager(storage_less_device)
    before: list = []  # Dynamo's ``disable`` as it was, once the first compile imported Dynamo

    def dynamo_off(backend) -> None:
        import torch._dynamo

        if not before:
            before.append(torch._dynamo.config.disable)
        torch._dynamo.config.disable = True
        seen.compiled = True
        seen.backends.add(_backend_name(backend))

    compile_original = torch.compile
    def disabled_by_the_model() -> bool:  # Dynamo's ``disable`` as the model set it before it first compiled
        return bool(before and before[0])

    torch.compile = _as_eager(compile_original, dynamo_off, "fullgraph", backend_at=None,
                              then=_failing_where_directml_fails(storage_less_device, disabled_by_the_model))
    optimize = _DynamoOptimizeWrapped(dynamo_off, _failing_where_directml_fails(storage_less_device,
                                                                                disabled_by_the_model, later=True))
    try:
        yield seen
    finally:
        torch.compile = compile_original
        optimize.undo()
        if before:
            torch._dynamo.config.disable = before[0]
            _forget_what_dynamo_skipped()


def _backend_name(backend) -> str:
    """"inductor", "aot_eager", or a callable backend's name; ``torch.compile`` hands ``optimize`` its backend
    wrapped (``_TorchCompileWrapper``), which keeps the name it was given."""
    if isinstance(backend, str):
        return backend
    return str(getattr(backend, "compiler_name", None) or getattr(backend, "__name__", type(backend).__name__))


def _failing_where_directml_fails(storage_less_device: Optional[str], disabled_by_the_model, later: bool = False):
    """What :func:`_as_eager` does with its compiler's result: nothing, or (DirectML) make what it compiled fail as
    it does there, unless the model turned Dynamo off itself. ``later``: the result compiles when called
    (``torch._dynamo.optimize(backend)(fn)``)."""
    if storage_less_device is None:
        return None

    def failing_as_there(compiled, original, whole_graph: bool):
        from dmlprof.directml.compiled_on_directml import failing_as_on_directml

        return failing_as_on_directml(compiled, original, whole_graph, storage_less_device, disabled_by_the_model)

    if later:
        return lambda context, args, kwargs, whole_graph: _ThenCompiled(
            context, lambda compiled, original: failing_as_there(compiled, original, whole_graph))
    return lambda compiled, args, kwargs, whole_graph: failing_as_there(
        compiled, args[0] if args else kwargs.get("model"), whole_graph)


class _ThenCompiled:
    """``torch._dynamo.optimize(backend)``'s context, whose call compiles: ``then(compiled, original)`` is what that
    call returns; as a context manager (the older use) and otherwise, the context itself."""

    def __init__(self, context, then):
        self._context, self._then = context, then

    def __call__(self, original):
        return self._then(self._context(original), original)

    def __enter__(self):
        return self._context.__enter__()

    def __exit__(self, *raised):
        return self._context.__exit__(*raised)

    def __getattr__(self, name):
        return getattr(self._context, name)


def _as_eager(compiler, dynamo_off, whole_graph: str, backend_at, then=None):
    """``compiler`` (``torch.compile``, ``torch._dynamo.optimize``) with Dynamo off first, told the backend named
    (keyword ``backend``, or the positional argument ``backend_at``); its ``whole_graph`` keyword dropped: nothing
    compiles while Dynamo is off, and ``fullgraph=True`` (``nopython=True``) would raise "found no compiled frames"
    (torch 2.13). ``then(compiled, args, kwargs, whole_graph)``, if given, is what it returns."""
    def compile_as_eager(*args, **kwargs):
        positional = args[backend_at] if backend_at is not None and len(args) > backend_at else INDUCTOR
        dynamo_off(kwargs.get("backend", positional))
        whole = bool(kwargs.pop(whole_graph, False))
        compiled = compiler(*args, **kwargs)
        return compiled if then is None else then(compiled, args, kwargs, whole)

    compile_as_eager.__wrapped__ = compiler
    return compile_as_eager


class _DynamoOptimizeWrapped:
    """``torch._dynamo.optimize`` wrapped by :func:`_as_eager` for as long as it lasts: at once where Dynamo is
    imported, else when it is (the model file's ``import torch._dynamo``); importing it here would cost every
    prediction seconds (torch 2.13: 2.3 s)."""

    def __init__(self, dynamo_off, then=None):
        self.dynamo_off, self.then = dynamo_off, then
        self.module = self.original = None
        self.finder = None
        if DYNAMO in sys.modules:
            self.wrap(sys.modules[DYNAMO])
        else:
            self.finder = _WhenImported(DYNAMO, self.wrap)
            sys.meta_path.insert(0, self.finder)

    def wrap(self, module) -> None:
        original = getattr(module, "optimize", None)
        if original is None or self.module is not None:
            return
        self.module, self.original = module, original
        module.optimize = _as_eager(original, self.dynamo_off, "nopython", backend_at=0, then=self.then)

    def undo(self) -> None:
        if self.finder is not None and self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        if self.module is not None:
            self.module.optimize = self.original


class _WhenImported(MetaPathFinder):
    """Calls ``then(module)`` once the module ``name`` is imported (its own code run); finds nothing itself."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        spec = _spec_from_the_other_finders(self, fullname, path, target)
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then(module):
            exec_module(module)
            self.then(module)

        loader.exec_module = exec_then  # this module's own loader (one is made for each spec found)
        return spec


def _spec_from_the_other_finders(finder, fullname, path, target):
    for other in list(sys.meta_path):
        find_spec = getattr(other, "find_spec", None)
        if other is finder or find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _forget_what_dynamo_skipped() -> None:
    """Dynamo's caches, and the mark it left on each code object it met while off ("skip it"): kept, a later
    compile in this process (the Python API, a notebook) silently compiled none of those frames (measured:
    ``nn.Sequential`` compiled 0 frames after a prediction; ``fullgraph=True`` raised). ``reset()`` clears the caches
    (torch 2.13: enough); torch 2.4 keeps the mark on the code object itself, cleared function by function."""
    import gc
    import types

    torch._dynamo.reset()
    reset_code = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    reset_code = getattr(reset_code, "reset_code", None)
    if reset_code is None:
        return
    for found in gc.get_objects():
        # type(), not isinstance(): a dead weakref.proxy among them raises ReferenceError for its __class__
        if type(found) is types.FunctionType:
            reset_code(found.__code__)
