"""``torch.compile`` under a prediction: the compiled code is predicted as the eager calls it makes (re-probe 14, case 14).

A prediction's tensors are stand-ins (``privateuseone`` with meta storage); Dynamo fakes them and Inductor then
lowers for a device it cannot build code for: measured, a compiled ``Sequential`` predicted for any target ended in
"InductorError: LoweringException: AssertionError" (torch 2.13; torch 2.4.1: "BackendCompilerFailed"), and that
failure read as the model's (exit 3). No real device would fail so: Inductor compiles for XPU (Triton) and MPS
(Metal), and torch-directml's tensors cannot be faked at all, so Dynamo leaves them to run eagerly (measured on
realdml, torch 2.4.1: a compiled Sequential taking device tensors runs). So while a prediction runs, Dynamo traces
nothing (``torch._dynamo.config.disable``, read at every frame it would trace, on torch 2.4.1 and later): a
compiled module or function runs its Python as written, its ops reach the stand-in one by one, and the session says
so in a note. The compiled object stays what ``torch.compile`` returned (an ``OptimizedModule`` keeps its
``_orig_mod.`` state-dict keys).

``torch.compile`` itself is wrapped for the prediction rather than Dynamo's configuration set beforehand: importing
``torch._dynamo`` takes seconds, and a model that compiles nothing should not pay them; the wrapper also tells whether
anything was compiled, which is when the note is due.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


class CompiledAsEager:
    """What :func:`compiled_code_runs_eagerly` saw: whether the model compiled anything."""

    def __init__(self):
        self.compiled = False

    def note(self, device: str) -> str:
        """The session's note, for a prediction of ``device`` (its title: DirectML, XPU, MPS)."""
        if device == "DirectML":
            happens = ("as torch-directml runs it: Dynamo cannot make fake tensors of its tensors (no storage), so a "
                       "compiled module whose device tensors come in as its inputs runs eagerly (measured, torch "
                       "2.4.1); one that makes a device tensor inside its compiled code raises "
                       "InternalTorchDynamoError there instead (compile only on CUDA, or set "
                       "torch._dynamo.config.suppress_errors = True)")
        else:
            happens = (f"as it runs uncompiled: on {device} Inductor compiles it into kernels of its own, whose "
                       f"calls are not those listed (the prediction cannot build {device} code)")
        return f"torch.compile: the compiled code was predicted as its eager calls, {happens}"


@contextmanager
def compiled_code_runs_eagerly():
    """While it lasts, whatever is ``torch.compile``'d runs eagerly (Dynamo off); yields a :class:`CompiledAsEager`."""
    seen = CompiledAsEager()
    original = torch.compile
    before: list = []  # Dynamo's ``disable`` as it was, once the first compile imported Dynamo

    def compile_as_eager(*args, **kwargs):
        import torch._dynamo

        if not before:
            before.append(torch._dynamo.config.disable)
        torch._dynamo.config.disable = True
        seen.compiled = True
        # nothing compiles while Dynamo is off: fullgraph=True would raise "found no compiled frames" (torch 2.13)
        kwargs.pop("fullgraph", None)
        return original(*args, **kwargs)

    torch.compile = compile_as_eager
    try:
        yield seen
    finally:
        torch.compile = original
        if before:
            torch._dynamo.config.disable = before[0]
            _forget_what_dynamo_skipped()


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
        if isinstance(found, types.FunctionType):
            reset_code(found.__code__)
