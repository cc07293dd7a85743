"""dmlprof: where each op of your training step ran, what it cost, and what to change."""
import sys

__version__ = "0.1.0"


def scan(path, device: str = "auto", **options):
    """Scan a model file or script; returns a :class:`dmlprof.session.Session`."""
    from dmlprof.runner import scan as _scan

    return _scan(path, device, **options)


def profile(device: str = "auto", **options):
    """Context manager recording every op call of a block; ``.session`` holds the result afterwards."""
    from dmlprof.runner import profile as _profile

    return _profile(device, **options)


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
    for module, name in (("dmlprof.session", "Session"), ("dmlprof.report.model", "Report")):
        formatter.for_type_by_name(module, name, _notebook_html)


def _notebook_html(value) -> str:
    from dmlprof.render.notebook import notebook_html

    return notebook_html(value)


_register_notebook_view()

__all__ = ["__version__", "scan", "profile", "load", "patch"]
