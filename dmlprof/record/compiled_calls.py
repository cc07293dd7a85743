"""A ``torch.compile(module)``'s call, recorded as one call of the module compiled, with dmlprof's global module
hooks withdrawn while it runs.

Why (re-probe 11, cases 21, 22, 41, 49, 57): torch (2.13) warns at every call of an ``OptimizedModule`` while global
module hooks exist, and the hooks were dmlprof's: a script whose warning filters turn UserWarnings into errors (a
test suite, ``PYTHONWARNINGS=error::UserWarning``) died at its compile. And Dynamo, seeing global hooks, traces
``Module.__call__`` with the hooks in it rather than ``forward``: it traced dmlprof's hook bodies, guarded on the
depth of its module stack (recompiling to its limit, a message on the user's stderr) and broke the user's graph at
``sys._getframe``. The program compiled was not the one compiled without dmlprof.

While a compiled module runs, then, dmlprof's hooks are not registered (torch and Dynamo see the program's own
hooks, if any) and the call is the compiled module's, entered and left as a hook would: its forward calls are
the module's, its backward nodes tagged with its name. Its submodules run inside compiled graphs, where no hook
would see them one by one without changing the graphs. The ``OptimizedModule`` class's ``__call__`` is wrapped
while a tracker is installed. Where ``torch._dynamo`` is not imported yet (a scan installs the tracker before the
script imports it), the class is wrapped when the first compiled module is built: torch's global hook for module
registration (which neither torch's warning nor Dynamo looks at) sees its ``_orig_mod`` set.
"""
from __future__ import annotations

import sys
from typing import Optional

import torch

_EVAL_FRAME = "torch._dynamo.eval_frame"


def _optimized_module_class() -> Optional[type]:
    """torch's ``OptimizedModule``, where ``torch._dynamo`` is imported (never imported here: it takes a second)."""
    return getattr(sys.modules.get(_EVAL_FRAME), "OptimizedModule", None)


class CompiledCalls:
    """Wraps ``OptimizedModule.__call__`` for a :class:`~dmlprof.record.attribution.ModuleTracker`."""

    def __init__(self, tracker):
        self.tracker = tracker
        #: (the class wrapped, its own ``__call__`` before, or None where it had none of its own)
        self._wrapped: Optional[tuple] = None
        self._registration = None

    def install(self) -> None:
        if not self._wrap():
            self._registration = torch.nn.modules.module.register_module_module_registration_hook(self._registered)

    def remove(self) -> None:
        if self._registration is not None:
            self._registration.remove()
            self._registration = None
        if self._wrapped is not None:
            cls, own_call = self._wrapped
            if own_call is None:
                del cls.__call__
            else:
                cls.__call__ = own_call
            self._wrapped = None

    def _registered(self, parent, name, child):
        # a registration hook runs for each submodule set anywhere: it returns None (the submodule kept as it is),
        # and stays registered once done (removing it now would change the dict torch is going through)
        if self._wrapped is None and name == "_orig_mod":
            self._wrap()

    def _wrap(self) -> bool:
        cls = _optimized_module_class()
        if cls is None:
            return False
        own_call = cls.__dict__.get("__call__")
        call = cls.__call__
        tracker = self.tracker

        def __call__(module, *args, **kwargs):
            # Inside a compiled call already (the hooks withdrawn), or traced by Dynamo: as torch would
            if tracker.hooks_withdrawn or torch.compiler.is_compiling():
                return call(module, *args, **kwargs)
            compiled = module._orig_mod
            tracker.enter(compiled)
            output = None
            try:
                with tracker.withdrawn():
                    output = call(module, *args, **kwargs)
            finally:
                tracker.leave(output)
            return output

        __call__.__wrapped__ = call
        cls.__call__ = __call__
        self._wrapped = (cls, own_call)
        return True
