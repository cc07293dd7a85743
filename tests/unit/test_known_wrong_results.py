"""Calls of ops whose results were wrong on real DirectML: flagged in every DirectML report, by provenance.

GIVEN a measured truth table (synthetic here: the shipped one changes when it is measured again) in
      which upsample_bilinear2d (confirmed on real GPUs) and cumsum (seen on realdml only) gave wrong
      float32 results
WHEN  a report is built for sessions that called them
THEN  a DirectML session (live, emulated or predicted) names each with its measured error, its
      provenance and its fix, confirmed ones first; a CUDA session names none; every renderer shows it.
"""
import json

import pytest

from dmlprof.render.html import render_html
from dmlprof.render.terminal import render_text
from dmlprof.report import build_report
from dmlprof.tables import measured
from session_factory import make_session

TABLE = {
    "format": "dmlprof-measured-table", "format_version": 1, "package": "torch-directml",
    "package_version": "0.2.5.dev240914", "torch_version": "2.4.1", "date": "2026-12-02", "versions": {},
    "ops": {
        "aten::upsample_bilinear2d.vec": {"float32": {"calls": 6, "device": 6, "wrong": 5, "max_abs_error": 1.47,
                                                      "max_rel_error": 0.9, "samples": ["s"], "aborts": 0, "raises": 0}},
        "aten::cumsum": {"float32": {"calls": 4, "device": 4, "wrong": 3, "max_abs_error": 0.02, "max_rel_error": 0.01,
                                     "samples": [], "aborts": 0, "raises": 0},
                         "int64": {"calls": 4, "device": 4, "wrong": 0, "aborts": 0, "raises": 0}},
        "aten::addmm": {"float32": {"calls": 9, "device": 9, "wrong": 0, "aborts": 0, "raises": 0}},
        "aten::mul.Tensor": {"bool,float32": {"calls": 4, "device": 4, "wrong": 4, "max_abs_error": None, "aborts": 0,
                                              "raises": 0},
                             "float32": {"calls": 90, "device": 90, "wrong": 0, "aborts": 0, "raises": 0}},
        "aten::convolution": {"float32": {"calls": 9, "device": 9, "wrong": 1, "max_abs_error": 20.0, "aborts": 0,
                                          "raises": 0}},
    },
}
CALLS = [
    {"op": "aten::addmm", "time_ns": 5_000},
    {"op": "aten::cumsum", "time_ns": 5_000, "source": "net.py:7"},
    {"op": "aten::upsample_bilinear2d.vec", "time_ns": 5_000, "source": "net.py:12"},
    {"op": "aten::upsample_bilinear2d.vec", "time_ns": 5_000, "source": "net.py:12"},
]


@pytest.fixture(autouse=True)
def shipped_table(monkeypatch):
    monkeypatch.setattr(measured, "load_measured", lambda backend="dml": measured.MeasuredTable(TABLE))
    import dmlprof.report.build as build

    monkeypatch.setattr(build, "load_measured", lambda backend="dml": measured.MeasuredTable(TABLE))


@pytest.mark.parametrize("meta", [{"backend": "dml"}, {"backend": "emulated-dml"},
                                  {"mode": "predicted", "target": "dml"}], ids=["live", "emulated", "predicted"])
def test_a_directml_session_names_each_op_known_to_give_wrong_results_confirmed_first(meta):
    report = build_report(make_session(CALLS, meta=meta))
    found = report.known_wrong_results
    assert [k.op for k in found] == ["aten::upsample_bilinear2d.vec", "aten::cumsum"]
    bilinear, cumsum = found
    assert bilinear.calls == 2 and bilinear.max_abs_error == 1.47 and "DirectML#482" in bilinear.confirmed_by
    assert "interpolate_bilinear" in bilinear.fix and bilinear.sources == ("net.py:12",)
    assert not cumsum.confirmed and cumsum.fix is None


def test_a_session_on_another_device_names_none():
    assert build_report(make_session(CALLS, meta={"backend": "cuda", "device": "cuda:0"})).known_wrong_results == ()


def test_a_call_that_fell_back_ran_on_the_cpu_and_is_not_flagged():
    calls = [{"op": "aten::cumsum", "time_ns": 5_000, "verdict": "fallback"}]
    assert build_report(make_session(calls)).known_wrong_results == ()


def test_an_in_place_write_that_fell_back_still_misplaces_its_gradient_in_autograd():
    # re-probe 14, case 21: index_copy_ falls back on DirectML, but the slice it wrote is a device view, and
    # autograd's CopySlices (on the device) misplaces its gradient all the same
    written = '{"autograd_records": true, "view_offset": 4}'
    calls = [{"op": "aten::index_copy_", "time_ns": 5_000, "verdict": "fallback", "arguments": written,
              "source": "net.py:34"}]
    found = build_report(make_session(calls)).known_wrong_results
    assert [k.op for k in found] == ["aten::index_copy_"] and "starts past its base's start" in found[0].klass
    assert found[0].sources == ("net.py:34",)


def test_every_renderer_says_it_with_its_provenance():
    report = build_report(make_session(CALLS))
    text = " ".join(render_text(report, width=200).split())  # the note wraps in its column
    assert "KNOWN WRONG RESULTS" in text and "confirmed: microsoft/DirectML#482" in text
    assert "unconfirmed: seen on a software adapter only" in text
    page = render_html(report)
    assert "Known wrong results" in page and "DirectML#482" in page
    rows = json.loads(json.dumps(report.to_dict()))["known_wrong_results"]
    assert [r["op"] for r in rows] == ["aten::upsample_bilinear2d.vec", "aten::cumsum"]
    assert rows[1]["confirmed_by"] == ""


def test_wrong_results_are_told_apart_by_the_calls_dtypes():
    """mul of a float and a bool tensor gave a bool on DirectML; mul of two floats was right: only the first
    kind of call is flagged."""
    calls = [{"op": "aten::mul.Tensor", "time_ns": 5, "dtypes": "float32"},
             {"op": "aten::mul.Tensor", "time_ns": 5, "dtypes": "bool,float32", "source": "loss.py:3"}]
    found = build_report(make_session(calls)).known_wrong_results
    assert [(k.op, k.dtype, k.calls) for k in found] == [("aten::mul.Tensor", "bool,float32", 1)]


def test_an_op_wrong_in_a_few_measured_calls_only_is_not_flagged_unless_confirmed():
    """1 of 9 measured convolutions was wrong: an input the samples hit, not a user's every call."""
    calls = [{"op": "aten::convolution", "time_ns": 5}]
    assert build_report(make_session(calls)).known_wrong_results == ()


def test_a_scatter_add_whose_index_was_not_read_may_be_wrong_and_does_not_fail_check():
    """Re-probe 14 case 25: an index past the read's bound is unknown, not wrong (a permutation is exact on
    DirectML): said as a call that may give wrong results, left out of check's count; a read repeated target
    still fails it."""
    from dmlprof.render.ci import github_annotations, render_check_text
    from dmlprof.report.gate import check_limits

    unread = {"op": "aten::scatter_add", "time_ns": 5, "dtypes": "float32,int64", "source": "gnn.py:9",
              "arguments": json.dumps({"targets_read": False})}
    report = build_report(make_session([unread]))
    [found] = report.known_wrong_results
    assert found.unjudged and "were not read" in found.klass
    result = check_limits(report, None, None)
    assert result.passed and "calls with known wrong results" not in [c.name for c in result.checks]
    text = " ".join(render_text(report, width=200).split())
    assert "MAY GIVE WRONG RESULTS" in text and "KNOWN WRONG RESULTS" not in text
    assert "may be wrong on DirectML: aten::scatter_add x1 at gnn.py:9" in render_check_text(result, "gnn.py")
    assert "::warning" in github_annotations(result) and "may give wrong results" in github_annotations(result)
    repeated = dict(unread, arguments=json.dumps({"targets_repeat": True}))
    failed = check_limits(build_report(make_session([unread, repeated])), None, None)
    assert not failed.passed and [c.measured for c in failed.checks if c.name == "calls with known wrong results"] == [1]
