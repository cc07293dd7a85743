"""Re-probe 9: a device's CPU-fallback warning comes once per process under dmlprof too, ``-W error`` included.

GIVEN a script run with ``-W error::UserWarning`` that catches the warning (real torch-directml's fallback warning is
      TORCH_WARN_ONCE: the first fallback of the process raises, the steps after it run)
WHEN  dmlprof's capture (which turns torch's warn-always on to see every fallback) gets the fallback warning again
THEN  it neither raises it nor passes it on again; it raised it on every step (each step failed under dmlprof,
      only the first one plainly), and the report then read "0 fell back".
"""
from __future__ import annotations

import warnings

import pytest

from dmlprof.record.warning_capture import WarningCapture

FALLBACK = ("The operator 'aten::{}' is not currently supported on the DML backend and will fall back to run on the "
            "CPU. This may have performance implications.")


def test_an_error_filter_raises_the_fallback_warning_once_per_process_as_torch_warns_it():
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("error", UserWarning)
        with WarningCapture() as capture:
            capture.in_call = True
            with pytest.raises(UserWarning):
                warnings.warn(FALLBACK.format("native_group_norm_backward"))
            warnings.warn(FALLBACK.format("native_group_norm_backward"))  # torch gives it no more: nothing raised
            warnings.warn(FALLBACK.format("lerp.Scalar_out"))  # one static for every op: once per process
            with pytest.raises(UserWarning):  # a warning torch gives on every call still raises as plainly
                warnings.warn("An output with one or more elements was resized")
    assert len(capture.messages) == 4  # each is still seen by dmlprof (the fallbacks are judged from them)
