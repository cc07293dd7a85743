"""The notebook view: a Session or Report as HTML for Jupyter (IPython's ``text/html``).

Registered with IPython by the top-level package (:mod:`dmlprof`), so that the
Session, which sits below every renderer, never imports one.
"""
from __future__ import annotations

import html

from dmlprof.render.terminal import render_text
from dmlprof.report import report_of


def notebook_html(source) -> str:
    """The report of a Session or Report as an HTML fragment for a notebook cell."""
    return f"<pre>{html.escape(render_text(report_of(source)))}</pre>"
