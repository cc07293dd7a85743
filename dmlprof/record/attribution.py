"""Who asked for an op: the module path and the user's source line.

Forward ops are attributed through global module hooks (a stack of module
names); a compiled module's call is one call of the module compiled, the hooks
withdrawn while it runs (:mod:`dmlprof.record.compiled_calls`). Backward ops run outside any module, so while the forward pass runs we
tag every autograd node created inside a module with that module's name (and
the user line that called it); in backward, the engine's current node tells us
which forward module the op belongs to.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import torch

from dmlprof.files import shown_path
from dmlprof.record.compiled_calls import CompiledCalls

_TORCH_DIR = str(Path(torch.__file__).resolve().parent) + os.sep
_DMLPROF_DIR = str(Path(__file__).resolve().parent.parent) + os.sep
_STDLIB_DIRS = tuple(
    str(Path(p).resolve()) + os.sep
    for p in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")}
    if p
)
# Frames inside these never count as "the user's line".
_NOT_USER_PREFIXES = (_TORCH_DIR, _DMLPROF_DIR) + _STDLIB_DIRS
# AccumulateGrad nodes have no forward sequence number (it reads as 2**64-1).
_NO_SEQUENCE = 2**64 - 1

_user_code_cache: dict = {}


def _is_user_code(code) -> bool:
    known = _user_code_cache.get(code)
    if known is None:
        filename = code.co_filename
        if filename.startswith("<") and not filename.startswith("<ipython"):
            known = False  # <frozen ...>, <string>
        else:
            try:
                resolved = os.path.realpath(filename) if not filename.startswith("<") else filename
            except (OSError, ValueError):
                resolved = filename
            known = not resolved.startswith(_NOT_USER_PREFIXES) and "site-packages" + os.sep + "torch" not in resolved
        _user_code_cache[code] = known
    return known


def user_source_line(skip: int = 1) -> str:
    """``file:line`` of the innermost frame that is the user's code, or ''.

    The walk stops at dmlprof's own runner: what called dmlprof (the console
    script, a benchmark) is not the line that asked for the op.
    """
    try:
        frame = sys._getframe(skip)
    except ValueError:  # a shallow stack: an autograd device thread calling in from C++
        return ""
    left_dmlprof = False
    inner = None
    while frame is not None:
        code = frame.f_code
        if _is_user_code(code):
            # the line that started dmlprof (a console script's `sys.exit(entry())`, a call of dmlprof.scan)
            # is who ran the scan, not who asked for the op: the call was dmlprof's own (a contract's batch)
            if inner is not None and _is_entry_code(inner):
                return ""
            return f"{shown_path(code.co_filename)}:{frame.f_lineno}"
        in_dmlprof = _is_dmlprof_code(code)
        if in_dmlprof and left_dmlprof:
            return ""
        left_dmlprof = left_dmlprof or not in_dmlprof
        inner = code
        frame = frame.f_back
    return ""


#: dmlprof's entry points: whoever calls one of them runs a scan (the console script, python -m, the API)
_ENTRY_FILES = tuple(_DMLPROF_DIR + name for name in ("__init__.py", "__main__.py", "cli" + os.sep + "__init__.py"))


_entry_code_cache: dict = {}


def _is_entry_code(code) -> bool:
    known = _entry_code_cache.get(code)
    if known is None:  # a path resolved once per code object: it is asked for each call whose line is wanted
        filename = code.co_filename
        known = _entry_code_cache[code] = filename.startswith(_ENTRY_FILES) or (
            not filename.startswith("<") and os.path.realpath(filename).startswith(_ENTRY_FILES))
    return known


def raised_at(exc: BaseException) -> str:
    """``file:line`` where ``exc`` was raised in the user's code, or '': the innermost frame of its
    traceback that is the user's own file, else (an error inside an installed library, such as
    transformers) the innermost that is any library's but torch's or dmlprof's."""
    frames = [(frame.f_code, line) for frame, line in traceback.walk_tb(exc.__traceback__)]
    user = [(code, line) for code, line in frames if _is_user_code(code)]
    own = [(code, line) for code, line in user if _INSTALLED not in os.path.realpath(code.co_filename)]
    for code, line in reversed(own or user):
        return f"{shown_path(code.co_filename)}:{line}"
    return ""


#: where pip installs libraries (site-packages, or dist-packages on Debian's Python)
_INSTALLED = "-packages" + os.sep


_dmlprof_code_cache: dict = {}
#: dmlprof's code that runs inside the user's own call rather than around it: ``--from cuda``'s device
#: remapping (a TorchFunctionMode, between ``nn.Linear(...)`` and its weights' ``uniform_``), the
#: torch_directml stand-in, a replacement op. Passed over as torch's frames are, never taken for the runner
#: (where the walk stops with no line): the line that asked is the user's, further out.
_ON_THE_USERS_BEHALF = tuple(_DMLPROF_DIR + name for name in (
    os.path.join("backends", "remap.py"), os.path.join("backends", "directml_shim.py"), "replacements" + os.sep))


def _is_dmlprof_code(code) -> bool:
    """Whether ``code`` is dmlprof's own, around the user's code (its runner), not inside one of its calls."""
    known = _dmlprof_code_cache.get(code)
    if known is None:
        filename = code.co_filename
        resolved = filename if filename.startswith("<") else os.path.realpath(filename)
        known = any(name.startswith(_DMLPROF_DIR) and not name.startswith(_ON_THE_USERS_BEHALF)
                    for name in (filename, resolved))
        _dmlprof_code_cache[code] = known
    return known


class ModuleTracker:
    """Keeps the current module path, and maps autograd nodes to modules."""

    def __init__(self, on_root_forward=None):
        #: called when a forward starts with no module running (once per model call)
        self.on_root_forward = on_root_forward
        self.names: dict = {}  # module -> qualified name
        self.param_owner: dict = {}  # id(parameter) -> module name
        self.stack: list = []
        #: for each module on ``stack``: the autograd sequence number its forward started at (nodes made before
        #: it, in the parent's own forward, are the parent's even where the module's outputs reach them)
        self.started: list = []
        #: for each module on ``stack``: nodes its submodules reached but did not own (made before they began),
        #: where its own walk starts besides its outputs
        self.handed_up: list = []
        self.node_owner: dict = {}  # autograd sequence number -> (module, source)
        self._handles: list = []
        #: how many compiled modules' calls have the hooks out now (record/compiled_calls.py)
        self._withdrawn = 0
        self._compiled_calls: Optional[CompiledCalls] = None

    # -- naming ------------------------------------------------------------
    def name_tree(self, root: torch.nn.Module, root_name: Optional[str] = None) -> None:
        """Name ``root`` and all its submodules (``Root.layer1.0.conv1``)."""
        root_name = root_name or type(root).__name__
        for sub_name, module in root.named_modules():
            self.names.setdefault(module, f"{root_name}.{sub_name}" if sub_name else root_name)
        for param_name, param in root.named_parameters():
            owner = param_name.rpartition(".")[0]
            self.param_owner.setdefault(id(param), f"{root_name}.{owner}" if owner else root_name)

    def classes(self) -> dict:
        """Module path -> its class name (``Net.layer1.0`` -> ``BasicBlock``), for every module named so far.

        The paths say where a module sits, its class says what it is: a report's
        module tree reads ``layer1.0 (BasicBlock)`` rather than a bare index.
        """
        return {name: type(module).__name__ for module, name in self.names.items()}

    def _name_of(self, module: torch.nn.Module) -> str:
        name = self.names.get(module)
        if name is None:
            if self.stack:  # created on the fly, or not a registered child
                name = f"{self.stack[-1][0]}.{type(module).__name__}"
                self.names[module] = name
            else:  # a new root seen in script mode
                self.name_tree(module)
                name = self.names[module]
        return name

    # -- hooks -------------------------------------------------------------
    def install(self) -> None:
        self._register_hooks()
        self._compiled_calls = CompiledCalls(self)
        self._compiled_calls.install()

    def remove(self) -> None:
        if self._compiled_calls is not None:
            self._compiled_calls.remove()
            self._compiled_calls = None
        self._remove_hooks()
        self.stack.clear()
        self.started.clear()
        self.handed_up.clear()

    def _register_hooks(self) -> None:
        hooks = torch.nn.modules.module
        self._handles = [
            hooks.register_module_forward_pre_hook(self._enter),
            # always_call: a forward that raises (caught by the caller, who goes on) leaves its module too;
            # otherwise every later call would be charged to it
            hooks.register_module_forward_hook(self._leave, always_call=True),
        ]

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    @property
    def hooks_withdrawn(self) -> bool:
        return self._withdrawn > 0

    @contextmanager
    def withdrawn(self):
        """The global hooks taken out while a compiled module runs (record/compiled_calls.py says why)."""
        self._withdrawn += 1
        if self._withdrawn == 1:
            self._remove_hooks()
        try:
            yield
        finally:
            self._withdrawn -= 1
            if self._withdrawn == 0 and self._compiled_calls is not None:  # not where remove() came in between
                self._register_hooks()

    def enter(self, module) -> None:
        """``module``'s forward begins (a hook's work, for a call no hook sees: a compiled module's)."""
        self._push(module)

    def leave(self, output) -> None:
        """The forward entered last ended with ``output`` (None where it raised)."""
        self._pop(output)

    # Dynamo traces these where a module call is compiled (a compiled function calling a module, module.compile()):
    # there they do nothing (is_compiling() is a constant to Dynamo), so the graphs are those compiled without them
    def _enter(self, module, inputs):
        if not torch.compiler.is_compiling():
            self._push(module)

    def _leave(self, module, inputs, output):
        if not torch.compiler.is_compiling():
            self._pop(output)

    def _push(self, module) -> None:
        if not self.stack and self.on_root_forward is not None:
            self.on_root_forward()
        if torch.is_grad_enabled():
            source = user_source_line(3)
        else:
            source = ""
        self.stack.append((self._name_of(module), source))
        self.started.append(_next_sequence_nr())
        self.handed_up.append([])

    def _pop(self, output) -> None:
        if not self.stack:
            return
        name, source = self.stack.pop()
        started = self.started.pop() if self.started else 0
        reached = self.handed_up.pop() if self.handed_up else []
        if torch.is_grad_enabled():
            older = self._tag_nodes(output, name, source, started, reached)
            if self.handed_up:
                self.handed_up[-1].extend(older)

    def _tag_nodes(self, output, name: str, source: str, started: int = 0, reached=()) -> list:
        """Tag the nodes this module's forward made; return those reached but made before it began."""
        # Post hooks fire innermost first, so a node already tagged belongs to a
        # deeper module: stop there. Each node is visited once per forward. A node numbered before this
        # module's forward began was made outside it (a functional op in the parent's own forward, whose
        # output this module took in): it is the parent's, tagged when the parent's forward ends, and so
        # are its ancestors (numbered earlier still, on this thread).
        # read below __torch_function__, a tensor subclass's and a mode's: the program's must not see dmlprof's reads
        # (a strict subclass refused them, a counting one or a logging TorchFunctionMode counted them)
        with torch._C.DisableTorchFunction():
            pending = [t.grad_fn for t in _iter_tensors(output)] + list(reached)
        owners = self.node_owner
        older = []
        while pending:
            node = pending.pop()
            if node is None:
                continue
            seq = node._sequence_nr()
            if seq == _NO_SEQUENCE or seq in owners:
                continue
            if seq < started:
                older.append(node)
                continue
            owners[seq] = (name, source)
            pending.extend(next_node for next_node, _ in node.next_functions)
        return older

    # -- lookups -------------------------------------------------------------
    def current(self) -> tuple:
        return self.stack[-1] if self.stack else ("", "")

    def owner(self, phase: str, optimizer_name: str = "") -> tuple:
        """(module, source) of the call being made now, in ``phase``."""
        if phase == "backward":
            node = torch._C._current_autograd_node()
            return self.owner_of_node(node) if node is not None else ("", "")
        if phase == "optimizer":
            return optimizer_name, ""
        return self.current()

    def owner_of_node(self, node) -> tuple:
        """(module, source) for the forward op behind a backward node."""
        seq = node._sequence_nr()
        if seq != _NO_SEQUENCE:
            return self.node_owner.get(seq, ("", ""))
        variable = getattr(node, "variable", None)  # AccumulateGrad
        if variable is not None:
            return (self.param_owner.get(id(variable), ""), "")
        return ("", "")

    def reset_nodes(self) -> None:
        self.node_owner.clear()


def _next_sequence_nr() -> int:
    """The sequence number the next autograd node made on this thread will get (0 where torch cannot say:
    then every node reachable is tagged, as before)."""
    try:
        return int(torch._C._autograd._get_sequence_nr())
    except (AttributeError, RuntimeError):
        return 0


def _iter_tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _iter_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _iter_tensors(item)
