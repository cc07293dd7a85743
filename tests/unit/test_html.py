"""The HTML report's data (report_data) and the escaping of what it renders.

Sessions are built directly from synthetic op frames: no model runs.
"""
from __future__ import annotations

import json
import re

import pytest

from dmlprof.render.html import OP_ROW_FIELDS, render_html, report_data, script_json
from dmlprof.session import Session
from session_factory import HOSTILE, SWEEP, fallback_mix, make_session

def test_hotspots_are_ranked_by_time_with_module_source_and_replacement():
    # GIVEN a session where a composite optimizer op costs the most fallback time
    data = report_data(fallback_mix())
    # THEN hotspots are ordered by time, slowest first
    assert [h["op"] for h in data["hotspots"]] == ["aten::_foreach_lerp_.Scalar", "aten::cumsum"]
    assert [h["rank"] for h in data["hotspots"]] == [1, 2]
    lerp, cumsum = data["hotspots"]
    assert lerp["inner_ops"] == ["aten::lerp.Scalar_out"] and lerp["inner_calls"] == 4
    assert lerp["bytes_moved"] == 4096 and lerp["sources"] == ["train.py:3"]
    # the replacement comes from dmlprof.replacements for the inner op that fell back
    from dmlprof.replacements import advice_for_hotspot

    assert lerp["replacement"] == advice_for_hotspot(["aten::lerp.Scalar_out"])
    assert lerp["replacement"]  # a known one exists today
    assert cumsum["calls"] == 2 and cumsum["time_ms"] == pytest.approx(0.05)
    assert cumsum["modules"] == ["Net.pool"]
    # the line where it cost more time comes first
    assert cumsum["sources"] == ["model.py:22", "model.py:10"]
    assert cumsum["replacement"] is None


def test_cards_show_coverage_by_calls_and_time_and_fallback_share():
    data = report_data(fallback_mix())
    cards = {c["key"]: c for c in data["cards"]}
    assert cards["device"]["value"] == "dml" and "torch-directml 0.2.5.dev240914" in cards["device"]["detail"]
    assert cards["mode"]["value"] == "scan"
    assert cards["coverage_calls"]["value"] == "33.3%"  # 2 of 6 calls on the device
    assert cards["coverage_time"]["value"] == f"{100 * 10_000 / 151_000:.1f}%"
    assert cards["fallback_time"]["value"] == f"{100 * 140_000 / 151_000:.1f}%"
    assert cards["fallback_time"]["tone"] == "bad"


def test_op_rows_are_aggregated_per_op_verdict_phase():
    data = report_data(fallback_mix())
    rows = [dict(zip(OP_ROW_FIELDS, row)) for row in data["ops"]]
    # 6 calls, 4 groups: the table stays small however many calls there were
    assert len(rows) == 4
    addmm = next(r for r in rows if r["op"] == "aten::addmm")
    assert addmm["calls"] == 2 and addmm["time_ms"] == pytest.approx(0.01)
    lerp = next(r for r in rows if r["op"].startswith("aten::_foreach"))
    assert lerp["fallback_ops"] == "aten::lerp.Scalar_out" and lerp["phase"] == "optimizer"
    assert sum(r["share"] for r in rows) == pytest.approx(1.0, abs=1e-4)


def test_module_tree_has_parents_first_natural_order_and_shares():
    session = make_session([
        {"op": "aten::mm", "time_ns": 100, "module": "Net.blocks.10.fc"},
        {"op": "aten::mm", "time_ns": 100, "module": "Net.blocks.2.fc"},
        {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 300, "module": "Net.blocks.2.fc"},
    ])
    modules = report_data(session)["modules"]
    names = [m["module"] for m in modules]
    assert names == ["Net", "Net.blocks", "Net.blocks.2", "Net.blocks.2.fc", "Net.blocks.10", "Net.blocks.10.fc"]
    by = {m["module"]: m for m in modules}
    assert by["Net.blocks.2.fc"]["fallback_share"] == pytest.approx(0.75)
    assert by["Net.blocks.2.fc"]["device_share"] == pytest.approx(0.25)
    assert by["Net"]["calls"] == 3 and by["Net"]["has_children"] and not by["Net.blocks.10.fc"]["has_children"]


def test_large_module_tree_starts_open_only_near_the_root():
    calls = [{"op": "aten::mm", "time_ns": 10, "module": f"Net.blocks.{i}.layer.{j}"} for i in range(20) for j in range(3)]
    modules = report_data(make_session(calls))["modules"]
    assert len(modules) > 60
    assert all(m["open"] == (m["depth"] < 2) for m in modules)
    small = report_data(make_session(calls[:5]))["modules"]
    assert all(m["open"] for m in small)


def test_phase_split_follows_forward_backward_optimizer():
    session = make_session([
        {"op": "aten::sgd", "time_ns": 10, "phase": "optimizer"},
        {"op": "aten::mm", "time_ns": 30, "phase": "backward"},
        {"op": "aten::mm", "time_ns": 20, "phase": "forward"},
    ])
    phases = report_data(session)["phases"]
    assert [p["phase"] for p in phases] == ["forward", "backward", "optimizer"]
    assert max(p["bar"] for p in phases) == 1.0


def test_sweep_plots_only_with_a_sweep():
    from dmlprof.render.terminal import render_sweep_text

    assert report_data(fallback_mix())["sweep"] is None
    assert 'id="plot-throughput"' not in render_html(fallback_mix())

    session = make_session([{"op": "aten::mm", "time_ns": 10}], extras={"sweep": SWEEP})
    sweep = report_data(session)["sweep"]
    assert [r["batch_size"] for r in sweep["rows"]] == [8, 16, 32]
    assert [r["recommended"] for r in sweep["rows"]] == [False, True, False]
    assert sweep["lead"][-1] == "out of memory at batch size 32; 16 is the largest that fit"
    html = render_html(session)
    assert "out of memory at batch size 32; 16 is the largest that fit" in render_sweep_text(session)
    assert all(f'id="plot-{key}"' in html for key in ("throughput", "p95", "memory")) and "OOM" in html


def test_sweep_plots_put_sizes_on_a_log_axis_and_mark_the_knee_and_the_memory_edge():
    from dmlprof.render.sweep_plots import LEFT, RIGHT, TOP

    rows = [dict(SWEEP["rows"][0], batch_size=b, samples_per_s=r, step_ms_p95=p, peak_memory_bytes=m)
            for b, r, p, m in ((8, 100.0, 90.0, 1 << 20), (16, 180.0, 95.0, 2 << 20), (32, 185.0, 180.0, 4 << 20))]
    rows.append(dict(SWEEP["rows"][2], batch_size=64))
    sweep = {"rows": rows, "recommended_batch_size": 16, "knee_batch_size": 16, "memory_budget_bytes": None}
    plots = {p["key"]: p for p in report_data(make_session([], extras={"sweep": sweep}))["sweep"]["plots"]}
    throughput = plots["throughput"]
    # doublings are evenly spaced, from the left edge to the right
    xs = [t["x"] for t in throughput["x_ticks"]]
    assert xs[0] == LEFT and xs[-1] == RIGHT and xs[1] - xs[0] == pytest.approx(xs[2] - xs[1])
    # the OOM size has no point; the edge lies between the last size that fit (32) and the first that did not (64)
    assert [p["batch_size"] for p in throughput["points"]] == [8, 16, 32]
    assert throughput["oom"] == 64 and throughput["oom_x"] == pytest.approx((xs[2] + xs[3]) / 2)
    assert throughput["knee"] == 16 and throughput["knee_x"] == xs[1]
    # each plot's best value sits below the top of its axis; the recommended point is marked
    assert min(p["y"] for p in plots["p95"]["points"]) > TOP
    assert [p["recommended"] for p in plots["memory"]["points"]] == [False, True, False]
    assert plots["memory"]["points"][2]["text"] == "4.0 MiB" and plots["p95"]["points"][2]["text"] == "180.0 ms"


def test_partial_and_predicted_sessions_are_flagged():
    partial = report_data(make_session([{"op": "aten::mm", "time_ns": 10}],
                                       meta={"partial": True, "partial_reason": "step 2 raised"}))
    assert any(f["label"] == "Partial session" and "step 2 raised" in f["text"] for f in partial["flags"])

    predicted = make_session([{"op": "aten::mm", "time_ns": 0}], meta={"mode": "predicted", "table_version": "dml-0.2.5-t7"})
    data = report_data(predicted)
    assert any(f["label"] == "Predicted" and "dml-0.2.5-t7" in f["text"] for f in data["flags"])
    cards = {c["key"]: c for c in data["cards"]}
    assert cards["mode"]["value"] == "prediction" and "dml-0.2.5-t7" in cards["mode"]["detail"]
    assert cards["coverage_time"]["value"] == "n/a"  # no per-call times: no share by time
    assert "dml-0.2.5-t7" in render_html(predicted)


def test_a_prediction_shows_no_time_where_it_has_none():
    """A prediction has calls, not times: its page says n/a, never 0.0 us or 0.0 % of a time it did not measure."""
    predicted = make_session([{"op": "aten::addmm", "time_ns": 0},
                              {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 0, "module": "Net.pool"}],
                             meta={"mode": "predicted"})
    data = report_data(predicted)
    assert not data["timed"] and data["hotspots"]
    assert all(h["time"] == "n/a" and h["share_text"] == "n/a" and h["time_ms"] is None for h in data["hotspots"])
    assert all(p["time"] == "n/a" and p["time_ms"] is None for p in data["phases"])
    assert all(row[OP_ROW_FIELDS.index("time_ms")] is None for row in data["ops"])
    page = render_html(predicted)
    assert "0.0 us" not in page and ">0.0%<" not in page and "ranked by calls" in page


def test_empty_session_renders():
    session = Session(meta={"backend": "dml", "mode": "live"})
    data = report_data(session)
    assert data["ops"] == [] and data["hotspots"] == [] and any(f["label"] == "Empty" for f in data["flags"])
    assert "<html" in render_html(session)


def test_names_from_the_model_render_as_text_not_markup():
    # GIVEN a module, op, source and error message that are markup
    session = make_session(
        [
            {"op": HOSTILE, "verdict": "fallback", "time_ns": 50, "module": f"Net.{HOSTILE}", "source": f"{HOSTILE}:1"},
            {"op": "aten::mm", "time_ns": 10, "module": "Net.<img src=x onerror=alert(2)>"},
        ],
        meta={"model_name": HOSTILE, "partial": True, "partial_reason": HOSTILE, "device_name": "</script><!--"},
        extras={"sweep": {**SWEEP, "rows": [{**SWEEP["rows"][2], "error": HOSTILE}]}},
    )
    html = render_html(session)
    # THEN no tag from the data reaches the markup
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # escaped where the template prints it
    # the page has exactly its own two script elements, and one closing tag each
    assert len(re.findall(r"<script\b", html)) == 2 and len(re.findall(r"</script", html)) == 2
    assert "<!--" not in html
    # the inlined JSON still carries the exact names
    blob = re.search(r'<script type="application/json" id="dmlprof-data">(.*?)</script>', html, re.S).group(1)
    page = json.loads(blob)
    assert HOSTILE in {row[0] for row in page["ops"]}
    # the page script never writes markup from data
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html and "document.write" not in html


def test_script_json_cannot_close_its_element():
    text = script_json({"a": "</script><!-- & ]]> \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- & ]]> \u2028"}


def test_html_is_self_contained():
    html = render_html(fallback_mix())
    # nothing fetched: no external scripts, styles, images or fonts
    assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)=', html)
    assert "http://" not in html and "https://" not in html and "@import" not in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def test_run_details_carry_the_profiler_cross_check():
    check = {"matched_ops": 43, "time_ms": 101.0, "profiler_time_ms": 100.0, "ratio": 1.01}
    facts = report_data(make_session([{"op": "aten::mm", "time_ns": 10}], meta={"profiler_check": check}))["meta"]
    assert facts["profiler_check"] == "43 ops timed by both: dmlprof 101.0 ms, torch.profiler 100.0 ms (ratio 1.01)"
    assert report_data(fallback_mix())["meta"]["profiler_check"] == ""


def test_replace_comparison_only_when_scanned_with_replace():
    assert report_data(fallback_mix())["replace"] is None
    compare = {
        "before": {"steps": 1, "fallback_calls": 152, "fallback_calls_per_step": 152.0, "fallback_time_share": 0.2,
                   "step_time_ms": 30.0, "fallback_ops": {"aten::lerp.Scalar_out": 152}},
        "after": {"steps": 1, "fallback_calls": 0, "fallback_calls_per_step": 0.0, "fallback_time_share": 0.0,
                  "step_time_ms": 20.0, "fallback_ops": {}},
        "fallback_calls_removed": 152, "step_time_speedup": 1.5, "removed_ops": ["aten::lerp.Scalar_out"],
        "remaining_ops": [{"op": HOSTILE, "calls": 2, "replacement": None}], "applied": [{}, {}],
    }
    session = make_session([{"op": "aten::mm", "time_ns": 10}], extras={"replace": compare})
    data = report_data(session)["replace"]
    assert data["rows"][0] == {"label": "fallback calls", "before": "152", "after": "0"}
    assert data["rows"][2]["before"] == "20.0%" and data["speedup"] == "1.50x faster" and data["applied"] == 2
    html = render_html(session)
    assert 'id="replace-table"' in html and "aten::lerp.Scalar_out" in html and "<script>alert(1)" not in html


def test_the_device_card_keeps_a_backend_name_on_one_line():
    """The device card broke 'emulated-' / 'dml' over two lines: its value does not wrap."""
    from dmlprof.render.html import render_html
    from session_kinds import KINDS

    html = render_html(KINDS["live_dml"]())
    assert '.card[data-card="device"] .value { white-space: nowrap;' in html and 'data-card="device"' in html
