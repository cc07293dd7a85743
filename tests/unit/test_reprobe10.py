"""Re-probe 10 (issue 33): what a scanned script sees of Python, as plain python gives it.

GIVEN a script that uses ``__builtins__`` as ``__main__`` has it, counts its warnings with
      ``catch_warnings(record=True)``, or sets ``sys.excepthook`` to log a crash
WHEN  dmlprof runs it (in-process: the runner's helpers, no scan subprocess)
THEN  it computes and does what it does under plain python.
"""
from __future__ import annotations

import os
import sys
import warnings

import pytest

from dmlprof.record.warning_capture import WarningCapture
from dmlprof.runner import user_code

pytestmark = pytest.mark.live  # the warning capture turns torch's warn-always on and off


def test_a_script_sees_builtins_as_a_module_as_main_does(tmp_path, monkeypatch):
    # re-probe 10: exec put the builtins' dict there: `__builtins__.profile = ...` raised AttributeError (exit 3)
    script = tmp_path / "train.py"
    script.write_text("if not hasattr(__builtins__, 'profile'):\n    __builtins__.profile = lambda f: f\n"
                      "import pathlib\npathlib.Path(__file__).with_suffix('.out').write_text(type(__builtins__).__name__)\n")
    script.with_name("loader.py").write_text("import pathlib\npathlib.Path(__file__).with_suffix('.out').write_text("
                                             "__loader__.get_source('__main__').splitlines()[0])\n")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(script.read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pkg", raising=False)
    import builtins
    try:
        user_code.run_as_main(script)
        user_code.run_module_as_main("pkg.train")
        user_code.run_as_main(script.with_name("loader.py"))  # plain python's __main__ has a SourceFileLoader
    finally:
        vars(builtins).pop("profile", None)
    assert (tmp_path / "train.out").read_text() == (package / "train.out").read_text() == "module"
    assert (tmp_path / "loader.out").read_text() == "import pathlib"


def _counted() -> list:
    """What a script counts: two catch_warnings(record=True) blocks, each warned three times from one line, and a
    showwarning of its own, also warned three times from one line (Python's "default": once per place and block)."""
    counts = []
    for _ in range(2):
        with warnings.catch_warnings(record=True) as log:
            for _ in range(3):
                warnings.warn("counted")
        counts.append(len(log))
    shown = []
    saved = warnings.showwarning
    warnings.showwarning = lambda message, *rest: shown.append(str(message))
    try:
        for _ in range(3):
            warnings.warn("shown")
    finally:
        warnings.showwarning = saved
    return counts + [len(shown)]


def test_a_record_block_and_a_showwarning_get_a_repeated_warning_as_often_as_without_dmlprof():
    # re-probe 10: the capture's "always" filter stood in front: the record block's list got it 3 times, not once
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        plain = _counted()
        with WarningCapture() as capture:
            captured = _counted()
    assert plain == [1, 1, 1]
    assert captured == plain
    assert capture.messages.count("counted") == 6  # the capture itself still sees every one


def test_a_once_filter_is_not_reset_by_the_capture_putting_itself_back_in_front():
    # re-probe 10: a recorded call between two warnings (keep_first moving the capture in front of the block's
    # simplefilter("once")) let "once" through again: the record block held it twice
    def counted(capture=None):
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("once")
            for _ in range(2):
                warnings.warn("once")
                if capture is not None:
                    capture.keep_first()  # what each recorded call does
        return len(log)

    with warnings.catch_warnings():
        warnings.resetwarnings()
        plain = counted()
        with WarningCapture() as capture:
            captured = counted(capture)
    assert plain == captured == 1


def test_a_scripts_own_excepthook_gets_the_error_it_ended_with(capsys, monkeypatch):
    # re-probe 10: dmlprof said the error in its line, and a script's crash logger never ran
    seen = []
    try:
        raise ValueError("bad config")
    except ValueError as error:
        failure = error
    saved = sys.excepthook
    sys.excepthook = lambda kind, value, tb: seen.append((kind, value, tb is not None))
    try:
        user_code.its_excepthook(failure)
    finally:
        sys.excepthook = saved
    assert seen == [(ValueError, failure, True)]
    # Python's own hook (an earlier test of this process may have left another: torch.distributed's, IPython's)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    user_code.its_excepthook(failure)  # dmlprof's error line says it, no traceback added
    assert capsys.readouterr().err == ""


def test_torchs_own_excepthook_prints_no_traceback_beside_dmlprofs_error_line(capsys):
    # torch.distributed.init_process_group wraps Python's hook to prefix its traceback with "[rank0]: ": a rank's
    # error then printed the whole traceback above dmlprof's one error line
    try:
        raise RuntimeError("Connection reset by peer")
    except RuntimeError as error:
        failure = error

    def rank_prefixing_hook(kind, value, tb):
        sys.stderr.write("[rank0]: Traceback (most recent call last):\n")

    rank_prefixing_hook.__module__ = "torch.distributed.distributed_c10d"  # where torch defines its hook
    saved = sys.excepthook
    sys.excepthook = rank_prefixing_hook
    try:
        user_code.its_excepthook(failure)
    finally:
        sys.excepthook = saved
    assert capsys.readouterr().err == ""


class _Unprintable(Exception):
    """A script's exception whose message cannot be made (its __str__ and __repr__ raise)."""

    def __init__(self, a, b):
        super().__init__(a)
        self.b = b

    def __str__(self):
        raise RuntimeError("no str")

    def __repr__(self):
        raise RuntimeError("no repr")


def test_a_script_error_whose_str_fails_is_said_as_python_says_it_not_a_dmlprof_traceback():
    # re-probe 10: the scan ended in dmlprof's own traceback (RuntimeError: no str, from explaining the error)
    from dmlprof.backends.cpu import CpuBackend
    from dmlprof.model_file import describe_exception, printable

    try:
        raise _Unprintable(1, 2)
    except _Unprintable as error:
        failure = error
    with pytest.raises(RuntimeError, match="no str"):
        CpuBackend().known_error(failure)  # what the run's explanation of an error asks first
    said = printable(failure)
    assert CpuBackend().known_error(said) is None
    assert describe_exception(failure) == describe_exception(said) == "_Unprintable: <exception str() failed>"
    assert said.__traceback__ is failure.__traceback__  # the user's line is still found from it
    ok = ValueError("fine")
    assert printable(ok) is ok


def test_a_sweep_size_whose_model_error_cannot_say_itself_is_classified_not_a_crashed_child():
    # re-probe 10: the sweep's child died in its own traceback ("no batch size ran: ... last output: RuntimeError")
    from dmlprof.backends.cpu import CpuBackend
    from dmlprof.model_file import printable
    from dmlprof.sweep.child import _classify

    try:
        try:
            raise ValueError("the device said no")
        except ValueError as cause:
            raise _Unprintable(1, 2) from cause
    except _Unprintable as error:
        failure = error
    assert _classify(failure, CpuBackend()) == ("error", "ValueError: the device said no")  # its cause says more
    assert printable(failure).__cause__ is failure.__cause__
