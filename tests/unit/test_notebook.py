"""In Jupyter (an IPython shell) sessions and reports show as their report; the Session imports no renderer."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    import dmlprof  # registers the notebook view with the running shell
    from session_kinds import KINDS
    from dmlprof.report import build_report
    for value in (KINDS["live_dml"](), build_report(KINDS["sweep"]())):
        print(repr(shell.display_formatter.format(value)[0].get("text/html", "")[:60]))
""")


def test_a_notebook_shows_sessions_and_reports_as_their_report():
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=str(TESTS))], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    session_html, report_html = done.stdout.splitlines()
    assert session_html.startswith("'<pre>dmlprof live scan of net")
    assert report_html.startswith("'<pre>dmlprof batch-size sweep of net")


def test_outside_ipython_nothing_is_registered_or_imported():
    script = "import sys, dmlprof; print(any(m.startswith(('dmlprof.render', 'IPython')) for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "False", done.stderr
