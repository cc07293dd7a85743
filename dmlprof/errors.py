"""Errors that reach the user as one line and an exit code.

Anything a user can cause (a missing file, a model that raises, a device that is
not there) is raised as a :class:`DmlprofError` subclass. The CLI prints its
message and exits with its ``exit_code``; it never shows a traceback for these.
"""
from __future__ import annotations


class DmlprofError(Exception):
    """A failure the user can act on; ``str(err)`` is the one line they see."""

    exit_code = 2

    def __init__(self, message: str, *, remedy: str | None = None):
        super().__init__(message)
        self.remedy = remedy

    def one_line(self) -> str:
        text = str(self).strip().splitlines()[0] if str(self).strip() else type(self).__name__
        return f"{text} ({self.remedy})" if self.remedy else text


class CallRefused(BaseException):
    """Raised in place of a call that would end the process on the device (a fatal check in its native
    code), with ``error`` the device's words for it. A ``BaseException``, as the process death it stands
    for: a script's ``except Exception`` or ``except RuntimeError`` (a "CPU fallback" around an FFT) cannot
    swallow it and train on, which the real device would never let it do. The run ends here, as it would."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


class UsageError(DmlprofError):
    """Bad arguments or a file that cannot be used."""


class ModelFileError(DmlprofError):
    """The model file is missing, does not import, or breaks the contract."""


class ModelRaisedError(DmlprofError):
    """The user's model or script raised while dmlprof ran it."""

    exit_code = 3


class DeviceError(DmlprofError):
    """The requested device is not available, or failed in a known way."""

    exit_code = 4


class NotPredicted(DmlprofError):
    """A prediction reached what its stand-in device cannot follow on the target (a sparse tensor under ``--target
    xpu``): what the step does there is not known, so it is neither a failure nor the model's error."""


class ResultsDiffer(DmlprofError):
    """``scan --verify``: device results differ from the CPU's, or optimizer updates did not land."""

    exit_code = 5


class LimitExceeded(DmlprofError):
    """``dmlprof check``: the fallbacks passed a limit the user set."""

    exit_code = 6


class Interrupted(DmlprofError):
    """Ctrl-C while steps ran."""

    exit_code = 130


class SessionFileError(DmlprofError):
    """A saved session cannot be read."""
