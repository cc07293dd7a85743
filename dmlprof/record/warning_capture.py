"""Every warning raised while recording, in order, so each op call can see its own.

Backends with a CPU fallback warn once per process; with
``torch.set_warn_always(True)`` and Python's filter set to "always" they warn on
every call, and a call's fallback evidence is the warnings that arrived while
it ran.
"""
from __future__ import annotations

import warnings

import torch


class WarningCapture:
    def __init__(self):
        self.messages: list = []  # str(message) in arrival order
        self.categories: list = []
        self._catcher = None
        self._warn_always_before = None

    def __enter__(self):
        self._warn_always_before = torch.is_warn_always_enabled()
        self._catcher = warnings.catch_warnings()
        self._catcher.__enter__()
        warnings.simplefilter("always")
        warnings.showwarning = self._show
        torch.set_warn_always(True)
        return self

    def _show(self, message, category, filename, lineno, file=None, line=None):
        self.messages.append(str(message))
        self.categories.append(category.__name__ if isinstance(category, type) else str(category))

    def __exit__(self, *exc):
        torch.set_warn_always(self._warn_always_before)
        self._catcher.__exit__(*exc)
        return False

    def __len__(self):
        return len(self.messages)
