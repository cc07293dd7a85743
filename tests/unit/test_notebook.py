"""In Jupyter (an IPython shell) sessions and reports show as their report; the Session imports no renderer."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    import dmlprof  # registers the notebook view with the running shell
    from session_kinds import KINDS
    from dmlprof.report import build_report
    for value in (KINDS["live_dml"](), build_report(KINDS["sweep"]())):
        shown = shell.display_formatter.format(value)[0]
        print(json.dumps([shown.get("text/html", ""), shown.get("text/plain", "")]))
""")


def test_a_notebook_shows_sessions_and_reports_as_their_report():
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=str(TESTS))], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    (session_html, session_text), (report_html, report_text) = [json.loads(line) for line in done.stdout.splitlines()]
    assert session_html.startswith('<div class="dmlprof-report" data-kind="scan"')
    assert "dmlprof live scan of net" in session_html and 'data-tone="warn"' in session_html
    assert report_html.startswith('<div class="dmlprof-report" data-kind="sweep"')
    assert "Use batch size 16" in report_html and 'class="dmlprof-sweep"' in report_html
    # the plain views are one line each
    assert session_text == "<dmlprof live session of net on dml: 12 op calls, 3 fell back to the CPU>"
    assert report_text == "<dmlprof batch-size sweep of net (on dml): use batch size 16>"


def test_outside_ipython_nothing_is_registered_or_imported():
    script = "import sys, dmlprof; print(any(m.startswith(('dmlprof.render', 'IPython')) for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "False", done.stderr


def test_every_verdict_a_report_counts_has_its_colour_in_the_notebook():
    from dmlprof.render.notebook import VERDICT_COLOUR
    from dmlprof.schema import REPORT_VERDICTS

    assert set(VERDICT_COLOUR) == set(REPORT_VERDICTS)
    assert len(set(VERDICT_COLOUR.values())) == len(VERDICT_COLOUR)  # no two verdicts look alike
