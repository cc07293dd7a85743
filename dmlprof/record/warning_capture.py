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
dmlprof. What the scanned code set to receive warnings (``catch_warnings(record=True)``'s list, a
``showwarning`` of its own, logging's) still gets each one its filters let through, as often as without
dmlprof (:meth:`WarningCapture._pass_on`); Python's own printer is left out: the report lists them.
"""
from __future__ import annotations

import os
import sys
import warnings

import torch

from dmlprof.schema import FALLBACK_WARNING


_warn_always = torch.is_warn_always_enabled
# where warnings go when no code set a receiver of its own (a private name of CPython's warnings module since 3.6:
# read with getattr, so a Python without it passes nothing on rather than failing at import)
_PYTHONS_PRINTER = getattr(warnings, "_showwarnmsg_impl", None)
# dmlprof's own files: a warning torch raised in a call the recorder ran is placed there (see _callers_place)
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_WARNINGS_MODULES = frozenset({"warnings", "_py_warnings"})  # Python 3.14 moved the machinery to _py_warnings


class WarningCapture:
    def __init__(self):
        self.messages: list = []  # str(message) in arrival order
        self.categories: list = []
        self._catcher = None
        self._warn_always_before = None
        self._always = None  # the capture's "always" filter, once entered
        self.in_call = False  # set by the recorder while a recorded call runs: torch's warnings arrive then
        self._users_show = None  # a showwarning the scanned code set, which keep_first displaced
        self._users_warn_always = False  # torch.set_warn_always as the scanned code has it (we force it on)
        self._passed_on: set = set()  # what a warning filter's "once"/"default" has let through already
        self._fallback_warned = False  # the process's one fallback warning was given (see _show)
        self._torch_warned: set = set()  # torch's warnings passed on once: its warn-once is per process, not filter
        self._shower = self._show  # one bound method: each ``self._show`` is a new object, never ``is`` the last
        self._displayer_before = None  # warnings._showwarnmsg, which the capture stands in for while it runs
        self._filters_seen = None  # the filter list (held: its id is never reused) and contents _passed_on is for
        self._filters_contents: tuple = ()

    def __enter__(self):
        self._warn_always_before = self._users_warn_always = torch.is_warn_always_enabled()
        self._catcher = warnings.catch_warnings()
        self._catcher.__enter__()
        warnings.simplefilter("always")
        self._always = warnings.filters[0]
        warnings.showwarning = self._shower
        # every warning the filters let through reaches warnings._showwarnmsg, whoever receives it next: a
        # catch_warnings(record=True) block resets showwarning to Python's and appends in _showwarnmsg_impl, so a
        # showwarning of ours alone let its list take the capture's "always" (3 appended where Python appends 1)
        self._displayer_before = getattr(warnings, "_showwarnmsg", None)
        if self._displayer_before is not None:
            warnings._showwarnmsg = self._display
        torch.set_warn_always(True)
        return self

    def keep_first(self) -> None:
        """Put the capture back in front of any filter or ``showwarning`` the scanned code set since the last call
        (cheap where nothing changed: two identity checks and one flag read)."""
        if self._always is None:  # not capturing
            return
        filters = warnings.filters
        if filters and filters[0] is self._always and warnings.showwarning is self._shower:
            if not _warn_always():
                self._users_warn_always = False
                torch.set_warn_always(True)  # the script's set_warn_always(False): fallbacks would warn once only
            return
        shown = warnings.showwarning
        if shown is not self._shower:
            self._users_show = None if shown is getattr(warnings, "_showwarning_orig", None) else shown
        for index, item in enumerate(filters):
            if item is self._always:  # by identity: a filter of the script's may equal ours ("always")
                del filters[index]
                break
        filters.insert(0, self._always)
        mutated = getattr(warnings, "_filters_mutated", None) or getattr(warnings, "_filters_mutated_lock_held", None)
        if mutated is not None:
            mutated()
        warnings.showwarning = self._shower
        torch.set_warn_always(True)

    def _display(self, message) -> None:
        """In place of ``warnings._showwarnmsg``: each warning, as a :class:`warnings.WarningMessage`."""
        self._show(message.message, message.category, message.filename, message.lineno, message.file, message.line)

    def _show(self, message, category, filename, lineno, file=None, line=None):
        self.messages.append(str(message))
        self.categories.append(category.__name__ if isinstance(category, type) else str(category))
        if not isinstance(category, type):
            return
        if filename.startswith(_OURS):
            filename, lineno = _callers_place(filename, lineno)
        if not self._users_warn_always and FALLBACK_WARNING.search(self.messages[-1]):
            # a device's boxed CPU fallback warns once per process (TORCH_WARN_ONCE, one static for every op) unless
            # the script turned warn-always on: a second one would not exist plainly, so nothing raises or shows it
            if self._fallback_warned:
                return
            self._fallback_warned = True
        action = _users_action(message, category, filename, lineno, self._always)
        if action == "error":  # before the warn-once below: many of torch's warnings (TORCH_WARN) come on every call,
            # and one seen once already (recorded, ignored in a catch_warnings block) raised again under plain python
            raise message if isinstance(message, Warning) else category(message)
        if self.in_call and not self._users_warn_always:  # torch's warning, which it gives once without dmlprof
            if (str(message), category) in self._torch_warned:
                return
            self._torch_warned.add((str(message), category))
        if action != "ignore":
            self._pass_on(action, message, category, filename, lineno, file, line)

    def _pass_on(self, action, message, category, filename, lineno, file, line) -> None:
        """Give the warning to what the scanned code set to receive warnings, as often as its filter's ``action``
        and torch's warn-once (we turned warn_always on; the script may have it off) would have."""
        display = getattr(warnings, "_showwarnmsg_impl", None)
        receiver = _receiver(self._shower, self._users_show)
        if receiver is None and (display is None or display is _PYTHONS_PRINTER):
            return
        filters = warnings.filters
        theirs = tuple(item for item in filters if item is not self._always)  # keep_first moving ours is no change
        if filters is not self._filters_seen or theirs != self._filters_contents:
            # new filters (a catch_warnings block entered or left, a filter added): Python shows "once" anew
            self._passed_on.clear()
            self._filters_seen, self._filters_contents = filters, theirs
        text = str(message)
        if action == "always":
            key = None
        elif action == "once":
            key = (text, category)
        elif action == "module":
            key = (text, category, filename)
        else:  # "default"
            key = (text, category, filename, lineno)
        if key is not None:
            if key in self._passed_on:
                return
            self._passed_on.add(key)
        if receiver is not None:
            receiver(message, category, filename, lineno, file, line)
        else:
            display(warnings.WarningMessage(message, category, filename, lineno, file, line))

    def __exit__(self, *exc):
        torch.set_warn_always(self._warn_always_before)
        if self._displayer_before is not None:
            warnings._showwarnmsg = self._displayer_before
        self._catcher.__exit__(*exc)
        return False

    def __len__(self):
        return len(self.messages)


def _receiver(ours, displaced):
    """The ``showwarning`` a warning goes to as Python would send it now (None: ``_showwarnmsg_impl``, Python's
    printer or a record block's list): the script's that the capture displaced while ours is in place, one the
    script set since, or none where Python's own is in place (a catch_warnings(record=True) block puts it back)."""
    shown = warnings.showwarning
    if shown is ours:
        return displaced
    return None if shown is getattr(warnings, "_showwarning_orig", None) else shown


def _callers_place(filename: str, lineno: int) -> tuple:
    """Where the warning is placed without dmlprof: torch turns a kernel's warning into Python's at the innermost
    Python frame, which under the recorder is the recorder's own line (it re-runs the call), not the line that
    called torch. The first frame outside dmlprof and the warnings module is that line (its filters, its "default"
    once-per-line and what a ``catch_warnings(record=True)`` reads see the place they see plainly). A warning placed
    by its ``stacklevel`` at a frame of dmlprof's that stands between the caller and torch (the wrapper of a compiled
    module's call, record/compiled_calls.py) is the caller's: the walk starts at that frame where it is on the stack."""
    frame = placed = sys._getframe(1)
    while placed is not None and not (placed.f_lineno == lineno and placed.f_code.co_filename == filename):
        placed = placed.f_back
    frame = placed or frame
    while frame is not None:
        code = frame.f_code.co_filename
        if not code.startswith(_OURS) and frame.f_globals.get("__name__") not in _WARNINGS_MODULES:
            return code, frame.f_lineno
        frame = frame.f_back
    return filename, lineno


def _module_at(filename: str, lineno: int) -> str:
    """The module name a filter's ``module`` pattern is matched against, as ``warnings.warn`` (and torch's
    PyErr_WarnEx) gives it: the ``__name__`` of the frame the warning is placed at ("__main__" for the script,
    "torch.nn.functional"); the file name less ".py" only where no frame on the stack is at that place
    (``warn_explicit``'s rule). The file name alone made ``-W error::UserWarning:__main__`` match nothing."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_lineno == lineno and frame.f_code.co_filename == filename:
            return frame.f_globals.get("__name__", "<string>")
        frame = frame.f_back
    return filename[:-3] if filename[-3:].lower() == ".py" else filename


def _matched(pattern, text: str) -> bool:
    """A filter's message or module pattern against ``text`` as Python's ``_warnings`` matches it: None matches all,
    a plain str only itself (the filters Python starts with, ``default::DeprecationWarning:__main__``, hold one:
    its ``.match`` ended every script that raised a DeprecationWarning), else the compiled pattern's ``match``."""
    if pattern is None:
        return True
    if type(pattern) is str:
        return pattern == text
    return bool(pattern.match(text))


def _users_action(message, category, filename, lineno, ours) -> str:
    """The action the first of the scanned code's filters (those behind the capture's) that matches gives this
    warning, as ``warnings`` matches them; "default" where none does."""
    text = str(message)
    module = _module_at(filename, lineno)
    for item in warnings.filters:
        if item is ours:
            continue
        action, pattern, kind, module_pattern, line_number = item
        if (_matched(pattern, text) and issubclass(category, kind) and _matched(module_pattern, module)
                and (line_number == 0 or lineno == line_number)):
            return action
    return "default"
