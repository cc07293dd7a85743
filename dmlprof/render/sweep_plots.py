"""The sweep page's three plots (throughput, step p95, peak memory against batch size) as SVG geometry.

Plain numbers for the template to draw (inline SVG, no chart library): each
plot's points, axis labels, and where the knee, the memory edge (the first
size that ran out of memory) and the recommended size lie. Batch sizes sit on
a log2 axis, where a sweep's doublings are evenly spaced.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from dmlprof.render.format import fmt_bytes, fmt_ms, fmt_rate

#: sizes a plot holds (the smallest; a real sweep has about ten) and sizes it labels on its axis
PLOT_SIZES = 100
LABELLED_SIZES = 12
#: one plot's box (SVG user units) and the plotting area inside it
WIDTH, HEIGHT = 340, 210
LEFT, RIGHT, TOP, BOTTOM = 62, 326, 18, 170


#: (key, title, the row's value, how a value reads)
METRICS = (
    ("throughput", "Throughput (samples/s)", lambda r: r.samples_per_s if r.ok else None, fmt_rate),
    ("p95", "Step time p95", lambda r: r.step_ms_p95 if r.ok else None, fmt_ms),
    ("memory", "Peak memory", lambda r: r.peak_memory_bytes or None, fmt_bytes),
)


def sweep_plots(sweep) -> list:
    """One dict per metric (see :data:`METRICS`); empty when no size has a batch size to place.

    A sweep file with thousands of sizes (hostile, or broken) plots its first :data:`PLOT_SIZES`; the table
    below the plots says what the page left out.
    """
    rows = [r for r in sweep.rows if r.batch_size > 0][:PLOT_SIZES]
    if not rows:
        return []
    x_of = _x_axis([r.batch_size for r in rows])
    marks = _marks(sweep, x_of)
    return [_plot(key, title, value_of, text_of, rows, x_of, marks, sweep)
            for key, title, value_of, text_of in METRICS]


def _x_axis(sizes: list) -> Callable[[float], float]:
    low, high = math.log2(min(sizes)), math.log2(max(sizes))
    if high == low:
        return lambda size: (LEFT + RIGHT) / 2
    return lambda size: LEFT + (math.log2(size) - low) / (high - low) * (RIGHT - LEFT)


def _marks(sweep, x_of) -> dict:
    """Where the knee and the memory edge lie on the x axis (None where the sweep found none)."""
    knee = sweep.knee_batch_size
    edge, fit = sweep.oom_batch_size, sweep.largest_ok_batch_size
    if edge is not None:
        # the edge lies between the last size that fit and the first that did not
        edge_x = (x_of(fit) + x_of(edge)) / 2 if fit is not None else LEFT
    return {"knee_x": _r(x_of(knee)) if knee and knee > 0 else None, "knee": knee,
            "oom_x": _r(edge_x) if edge is not None else None, "oom": edge}


def _plot(key, title, value_of, text_of, rows, x_of, marks, sweep) -> dict:
    values = [(r, value_of(r)) for r in rows if (value_of(r) or 0) > 0]
    top, drawn, above = _scale(values, sweep.memory_budget_bytes if key == "memory" else None)
    y_of = _y_axis(top)
    points = _points(values, x_of, y_of, text_of)
    return {
        "key": key, "title": title, "points": points, "line": " ".join(f"{p['x']},{p['y']}" for p in points),
        "x_ticks": _ticks(rows, x_of), "y_top": text_of(top) if top else "",
        **_budget(drawn, y_of), **marks, "budget_above": fmt_bytes(above) if above else "",
        "box": {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": RIGHT, "top": TOP, "bottom": BOTTOM},
    }


#: a memory budget more than this many times the largest peak is named, not drawn (see :func:`_plot`)
OFF_SCALE = 2


def _scale(values, budget: Optional[int]) -> tuple:
    """(the plot's top, the budget to draw or None, the budget to name above the plot or None).

    A budget far above every size's peak (a 16 GiB card, 1 GiB used) would flatten the curve against the axis:
    the plot is then scaled to the measurements, and the budget named above it instead of drawn."""
    measured = max([v for _, v in values], default=0)
    if budget and measured and budget > OFF_SCALE * measured:
        return measured * 1.1, None, budget
    return max(measured, budget or 0) * 1.1, budget, None


def _points(values, x_of, y_of, text_of) -> list:
    """A point per size with a value: where it lies, and what its tooltip says."""
    return [{"x": _r(x_of(r.batch_size)), "y": _r(y_of(v)), "batch_size": r.batch_size, "text": text_of(v),
             "recommended": r.recommended} for r, v in values]


def _budget(budget: Optional[int], y_of) -> dict:
    """The memory budget's line (the memory plot only)."""
    if not budget:
        return {"budget_y": None, "budget": ""}
    return {"budget_y": _r(y_of(budget)), "budget": fmt_bytes(budget)}


def _ticks(rows, x_of) -> list:
    """Labels under the axis: every size, or every n-th when there are too many to read."""
    every = -(-len(rows) // LABELLED_SIZES)
    return [{"x": _r(x_of(r.batch_size)), "text": str(r.batch_size)} for r in rows[::every]]


def _y_axis(top: float) -> Callable[[float], float]:
    """Values from 0 (the bottom) to ``top`` (the top of the plotting area)."""
    if not top:
        return lambda value: BOTTOM
    return lambda value: BOTTOM - (value / top) * (BOTTOM - TOP)


def _r(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(float(value), 2)
