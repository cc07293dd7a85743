"""Re-probe 9: Python's own default filters hold plain strings where ``filterwarnings`` puts compiled patterns.

GIVEN the filter Python starts with, ``('default', None, DeprecationWarning, '__main__', 0)`` (its module a str)
WHEN  the scanned code raises any DeprecationWarning while dmlprof's capture is in front
THEN  the capture matches that filter as Python's ``_warnings`` does (a str by equality) and the script goes on;
      it called ``'__main__'.match`` and ended the script with AttributeError (exit 3 under plain python's rc 0).
"""
from __future__ import annotations

import warnings

from dmlprof.record.warning_capture import WarningCapture, _users_action

PYTHONS_DEFAULT = ("default", None, DeprecationWarning, "__main__", 0)  # as sys.warnoptions-free Python starts


def test_a_deprecation_warning_under_the_capture_goes_on_past_pythons_own_default_filter():
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.filters.insert(0, PYTHONS_DEFAULT)
        with WarningCapture() as capture:
            warnings.warn("old api", DeprecationWarning)
    assert capture.messages == ["old api"]


def test_a_plain_string_module_matches_by_equality_as_pythons_warnings_does():
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.filters.insert(0, ("error", None, UserWarning, "__main__", 0))
        warnings.filters.insert(0, ("ignore", "exact text", UserWarning, None, 0))
        # this test module's name is not "__main__": the str filter must not match it, nor by prefix
        assert _users_action(UserWarning("x"), UserWarning, __file__, 1, None) == "default"
        assert _users_action(UserWarning("exact text"), UserWarning, __file__, 1, None) == "ignore"
        assert _users_action(UserWarning("exact text and more"), UserWarning, __file__, 1, None) == "default"
