"""Re-probe 8: what a scanned script does with its warnings is what it does under plain python.

GIVEN a script run with `-W error::UserWarning` whose torch call warns on every call (TORCH_WARN, not _ONCE)
WHEN  the warning was seen once already (recorded in a catch_warnings block) and comes again
THEN  it raises under dmlprof as under plain python (it was dropped as "torch warns once").
"""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.live

WARNS_ON_EVERY_CALL = '''
import warnings, torch
a = torch.ones(3)
def add_into(out):
    torch.add(a, a, out=out)  # an out of the wrong shape: torch warns (Resize.cpp) on every such call
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    add_into(torch.empty(1))
print("SAID recorded", len(seen))
try:
    add_into(torch.empty(1))
    print("SAID not raised")
except UserWarning:
    print("SAID raised")
'''


def test_an_error_filter_raises_a_torch_warning_seen_before_as_plain_python_does(tmp_path):
    (tmp_path / "warns.py").write_text(WARNS_ON_EVERY_CALL, encoding="utf-8")
    options = ["-W", "error::UserWarning"]
    plain = subprocess.run([sys.executable, *options, "warns.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    scanned = subprocess.run([sys.executable, *options, "-m", "dmlprof", "scan", "warns.py", "--device", "cpu",
                              "--no-progress", "--no-profiler", "--out", "out"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)

    def said(out: str) -> list:
        return [line for line in out.splitlines() if line.startswith("SAID")]

    assert said(plain.stdout) == ["SAID recorded 1", "SAID raised"], plain.stderr[-2000:]
    assert scanned.returncode == 0, scanned.stderr[-2000:]
    assert said(scanned.stdout) == said(plain.stdout)


ERRORS_IN_ITS_OWN_MODULE = '''
import warnings, torch
warnings.filterwarnings("error", category=UserWarning, module="__main__")
torch.ones(2).sum()  # a recorded call: the capture is in front of the script's filter from here on
a = torch.ones(3)
for name, warn in (("kernel", lambda: torch.add(a, a, out=torch.empty(1))), ("own", lambda: warnings.warn("mine"))):
    try:
        warn()
        print("SAID", name, "not raised")
    except UserWarning:
        print("SAID", name, "raised")
'''


def test_a_filter_for_the_scripts_own_module_applies_as_under_plain_python(tmp_path):
    # the capture matched a filter's module pattern against the file name ('/tmp/x/mod'), not the module's name
    # ('__main__'): filterwarnings("error", module="__main__") raised nothing under dmlprof
    (tmp_path / "mod.py").write_text(ERRORS_IN_ITS_OWN_MODULE, encoding="utf-8")
    plain = subprocess.run([sys.executable, "mod.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    scanned = subprocess.run([sys.executable, "-m", "dmlprof", "scan", "mod.py", "--device", "cpu", "--no-progress",
                              "--no-profiler", "--out", "out"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=600)

    def said(out: str) -> list:
        return [line for line in out.splitlines() if line.startswith("SAID")]

    assert said(plain.stdout) == ["SAID kernel raised", "SAID own raised"], plain.stderr[-2000:]
    assert scanned.returncode == 0, scanned.stderr[-2000:]
    assert said(scanned.stdout) == said(plain.stdout)
