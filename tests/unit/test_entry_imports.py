"""The command's entry point imports no more than the command did: a scan's supervisor never loads torch."""
from __future__ import annotations

import subprocess
import sys

END_WITHOUT_A_SCRIPT = """
import sys
import dmlprof.cli as cli
cli.main = lambda: 0  # a command that ran no script (the supervisor of a scan's child, report, doctor)
try:
    cli.entry()
except SystemExit as exc:
    print("exit", exc.code, "torch imported" if "torch" in sys.modules else "no torch")
"""


def test_ending_a_process_that_ran_no_script_does_not_import_torch():
    # entry() imported dmlprof.runner.user_code to end the process, and with it torch: every scan's supervisor
    # spent ~5 s importing torch after its child had finished
    done = subprocess.run([sys.executable, "-c", END_WITHOUT_A_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["exit", "0", "no", "torch"], done.stdout + done.stderr
