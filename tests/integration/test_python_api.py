"""The Python API as the README writes it: predict, render as text, reach the report, read the help.

GIVEN a user who reads only the README and ``help()``
WHEN they call dmlprof from Python
THEN each call the README names works as written, without imports the README does not show.
"""
from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import dmlprof
from conftest import MODELS, REPO

pytestmark = [pytest.mark.live, pytest.mark.quick]


def test_scan_with_a_target_predicts_and_renders_as_text():
    session = dmlprof.scan(MODELS / "groupnorm_net.py", target="dml", steps=1, warmup=0)
    assert session.meta.kind == "predicted" and session.meta.prediction.target == "dml"
    text = dmlprof.render_text(session, top=5, width=100)
    assert text.startswith("dmlprof predicted scan of groupnorm_net") and "aten::native_group_norm_backward" in text


def test_a_device_and_a_target_together_are_refused():
    from dmlprof.errors import UsageError

    with pytest.raises(UsageError, match="not both"):
        dmlprof.scan(MODELS / "lenet5.py", "cpu", target="dml")


def test_a_profiled_block_renders_as_a_table_like_torch_profilers():
    import torch

    with dmlprof.profile("cpu", profiler=False) as run:
        (torch.ones(4, 4) @ torch.ones(4, 4)).sum()
    text = run.table(width=100)
    assert "dmlprof" in text.splitlines()[0] and "op calls" in text


def test_the_report_package_needs_no_import_of_its_own():
    code = ("import sys, dmlprof\n"
            "assert 'dmlprof.report' not in sys.modules and 'torch' not in sys.modules\n"
            "print(dmlprof.report.build_report.__name__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "build_report", done.stderr


def test_help_documents_profile_and_scan():
    parameters = inspect.signature(dmlprof.profile).parameters
    assert list(parameters) == ["device", "sync", "profiler", "name", "backend"]
    for name in ("sync", "profiler", "name", "backend", "run.table()", "partial"):
        assert name in dmlprof.profile.__doc__
    for name in ("target", "batch_size", "steps", "script_args", "remap_from"):
        assert name in dmlprof.scan.__doc__
