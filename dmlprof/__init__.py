"""dmlprof: where each op of your training step ran, what it cost, and what to change."""
__version__ = "0.1.0"


def scan(path, device: str = "auto", **options):
    """Scan a model file or script; returns a :class:`dmlprof.session.Session`."""
    from dmlprof.runner import scan as _scan

    return _scan(path, device, **options)


def load(path):
    """Load a saved session file."""
    from dmlprof.session import Session

    return Session.load(path)


__all__ = ["__version__", "scan", "load"]
