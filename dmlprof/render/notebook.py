"""The notebook view: a Session, Report or RunReport as an HTML fragment for Jupyter (IPython's ``text/html``).

Registered with IPython by the top-level package (:mod:`dmlprof`), so that the
Session, which sits below every renderer, never imports one. It formats the
same data as the HTML page (:func:`dmlprof.render.html.report_data`): the
verdict, the cards, the fallback hotspots with their fixes and the top ops,
inline and escaped, with inline styles only (a notebook may drop ``<style>``
and never runs a script of an untrusted output).
"""
from __future__ import annotations

from dmlprof.render.html import OP_ROW_FIELDS, environment, report_data
from dmlprof.schema import CPU, DEVICE, FALLBACK, HOST

#: rows the notebook shows (the page and the JSON report hold them all)
NOTEBOOK_HOTSPOTS = 10
NOTEBOOK_OPS = 10
#: each verdict as the page paints it (report.css); host, the host's bookkeeping, muted further than cpu
VERDICT_COLOUR = {DEVICE: "#2f81f7", FALLBACK: "#d1242f", CPU: "#6e7781", HOST: "#8c959f"}


def notebook_html(source) -> str:
    """The report of a Session or Report as an HTML fragment for a notebook cell."""
    data = report_data(source)
    ops = [dict(zip(OP_ROW_FIELDS, row)) for row in data["ops"][:NOTEBOOK_OPS]]
    return environment().get_template("notebook.html.j2").render(
        data=data, hotspots=data["hotspots"][:NOTEBOOK_HOTSPOTS], ops=ops, verdict_colour=VERDICT_COLOUR)
