"""Every warning raised while recording, in order, so each op call can see its own.

Backends with a CPU fallback warn once per process; with
``torch.set_warn_always(True)`` and Python's filter set to "always" they warn on
every call, and a call's fallback evidence is the warnings that arrived while
it ran.

The scanned code may set filters of its own while it is recorded (``warnings.filterwarnings("ignore")``
at a script's top, ``with warnings.catch_warnings(): warnings.simplefilter("ignore")`` around a noisy
call): a filter in front of ours kept the fallback warnings from reaching the capture, and every call
that fell back was judged to run on the device. So each recorded call puts the capture back in front
(:meth:`WarningCapture.keep_first`, with ``torch.set_warn_always(True)``, which a script may turn off),
and the capture honours an "error" filter of the user's by raising, as the warning would have without
dmlprof.
"""
from __future__ import annotations

import warnings

import torch


_warn_always = torch.is_warn_always_enabled


class WarningCapture:
    def __init__(self):
        self.messages: list = []  # str(message) in arrival order
        self.categories: list = []
        self._catcher = None
        self._warn_always_before = None
        self._always = None  # the capture's "always" filter, once entered

    def __enter__(self):
        self._warn_always_before = torch.is_warn_always_enabled()
        self._catcher = warnings.catch_warnings()
        self._catcher.__enter__()
        warnings.simplefilter("always")
        self._always = warnings.filters[0]
        warnings.showwarning = self._show
        torch.set_warn_always(True)
        return self

    def keep_first(self) -> None:
        """Put the capture back in front of any filter or ``showwarning`` the scanned code set since the last call
        (cheap where nothing changed: two identity checks and one flag read)."""
        if self._always is None:  # not capturing
            return
        filters = warnings.filters
        if filters and filters[0] is self._always and warnings.showwarning is self._show:
            if not _warn_always():
                torch.set_warn_always(True)  # the script's set_warn_always(False): fallbacks would warn once only
            return
        if self._always in filters:
            filters.remove(self._always)
        filters.insert(0, self._always)
        mutated = getattr(warnings, "_filters_mutated", None) or getattr(warnings, "_filters_mutated_lock_held", None)
        if mutated is not None:
            mutated()
        warnings.showwarning = self._show
        torch.set_warn_always(True)

    def _show(self, message, category, filename, lineno, file=None, line=None):
        self.messages.append(str(message))
        self.categories.append(category.__name__ if isinstance(category, type) else str(category))
        if isinstance(category, type) and _users_action(message, category, filename, lineno, self._always) == "error":
            raise message if isinstance(message, Warning) else category(message)

    def __exit__(self, *exc):
        torch.set_warn_always(self._warn_always_before)
        self._catcher.__exit__(*exc)
        return False

    def __len__(self):
        return len(self.messages)


def _users_action(message, category, filename, lineno, ours) -> str:
    """The action the first of the scanned code's filters (those behind the capture's) that matches gives this
    warning, as ``warnings`` matches them; "default" where none does."""
    text = str(message)
    module = filename[:-3] if filename.endswith(".py") else filename
    for item in warnings.filters:
        if item is ours:
            continue
        action, pattern, kind, module_pattern, line_number = item
        if ((pattern is None or pattern.match(text)) and issubclass(category, kind)
                and (module_pattern is None or module_pattern.match(module))
                and (line_number == 0 or lineno == line_number)):
            return action
    return "default"
