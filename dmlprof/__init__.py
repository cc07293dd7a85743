"""dmlprof: where each op of your training step ran, what it cost, and what to change."""
import sys
from typing import Optional

from dmlprof.version import __version__


def scan(path, device: str = "auto", *, target: Optional[str] = None, **options):
    """Scan a model file or script, as ``dmlprof scan`` does; returns a :class:`dmlprof.session.Session`.

    ``device``: ``auto``, ``cpu``, ``cuda``, ``dml``, ``mps``, ``xpu`` or ``emulated-dml``. ``target="dml"``
    predicts DirectML instead, with no device (``dmlprof scan --target dml``; a script runs on the
    emulated device). Keyword ``options``, all optional: ``batch_size``, ``steps``, ``warmup``;
    for a script ``script_args`` (its argv), ``run_to_end``, ``remap_from`` (``"cuda"``: its CUDA
    requests run on the scanned device), ``module`` (run as ``python -m``); live scans only:
    ``sync`` (False: ``--no-sync``), ``profiler``, ``verify``; predictions only: ``float64`` (an
    adapter that runs float64). Render it with :func:`render_text` or
    ``dmlprof.report.build_report(session)``; a scan that stops part-way raises an error whose
    ``session`` holds what was recorded.
    """
    if target is not None:
        if device != "auto":
            from dmlprof.errors import UsageError

            raise UsageError(f"give a device to scan on or a target to predict, not both ({device!r}, {target!r})")
        from dmlprof.predict import predict_scan

        return predict_scan(path, target=target, **options)
    from dmlprof.runner import scan as _scan

    return _scan(path, device, **options)


def profile(device: str = "auto", *, sync: bool = True, profiler: bool = True, name: str = "block", backend=None):
    """Record every op call of a block of code; ``.session`` holds the Session when the block ends::

        with dmlprof.profile("emulated-dml") as run:
            model.to(run.device)            # the block's device: calls on CPU tensors are only counted
            loss = model(x.to(run.device)).sum(); loss.backward(); optimizer.step()
        print(run.table())              # the report as text, as dmlprof scan prints it
        run.session.ops                 # one row per op call (a pandas DataFrame)

    ``device``: as for :func:`scan` (``auto`` picks the accelerator there is). ``sync=False`` keeps the
    device asynchronous (times are host-side). ``profiler=False``: no torch.profiler alongside (no
    cross-check, no device kernel times). ``name`` names the session. ``backend``: a prepared
    :class:`dmlprof.backends.Backend` instead of ``device``. Phases are inferred (module forwards,
    autograd's backward, optimizer steps); an exception in the block still leaves the partial
    session, marked partial, in ``run.session`` before it propagates.
    """
    from dmlprof.runner import profile as _profile

    return _profile(device, sync=sync, profiler=profiler, name=name, backend=backend)


def render_text(source, top: int = 15, width: Optional[int] = None) -> str:
    """The terminal report of a Session or Report, as text (what ``dmlprof scan`` prints): ``top``
    rows per table, laid out for ``width`` columns (None: this terminal's width)."""
    from dmlprof.render.terminal import render_text as _render_text

    return _render_text(source, top=top, width=width)


def load(path):
    """Load a saved session file."""
    from dmlprof.session import Session

    return Session.load(path)


def patch(model=None, optimizer=None):
    """Swap a model's modules, functional calls and optimizer step for DirectML-native replacements.

    Returns an undoable :class:`dmlprof.replacements.patching.Patch` (``.undo()``, or use it
    as a context manager, which also covers the loss). See :mod:`dmlprof.replacements`.
    """
    from dmlprof.replacements.patching import patch as _patch

    return _patch(model, optimizer)


def _register_notebook_view() -> None:
    """Inside IPython (Jupyter), show sessions and reports as their report.

    Registered by type name, so nothing is imported until a notebook displays
    one, and the Session itself never imports a renderer.
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["text/html"]
    for module, name in (("dmlprof.session", "Session"), ("dmlprof.report.model", "Report"),
                         ("dmlprof.report.run", "RunReport")):
        formatter.for_type_by_name(module, name, _notebook_html)


def _notebook_html(value) -> str:
    from dmlprof.render.notebook import notebook_html

    return notebook_html(value)


#: the subpackages reachable as ``dmlprof.report``, ``dmlprof.replacements``... without importing them
#: first; imported on first use, so ``import dmlprof`` (and ``dmlprof --help``) stays light
_LAZY = ("report", "replacements", "progress", "session", "render", "errors")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"dmlprof.{name}")
    raise AttributeError(f"module 'dmlprof' has no attribute {name!r}")


_register_notebook_view()

__all__ = ["__version__", "scan", "profile", "render_text", "load", "patch"]
