"""Every renderer over every kind of session (pyinstrument's test shape): each says what the session is.

The sessions are synthetic (tests/session_kinds.py); the golden tests pin the
exact text, these check the meaning that must hold for every kind.
"""
from __future__ import annotations

import json
import re

import pytest

from dmlprof.errors import UsageError
from dmlprof.render.html import render_html, report_data
from dmlprof.render.json_report import render_json
from dmlprof.render.terminal import render_text
from dmlprof.render.trace import write_tensorboard_run
from dmlprof.report import build_report
from session_kinds import KINDS, OP_KINDS

#: what made each synthetic session (Report.session_kind), and the words its title uses
SESSION_KIND = {"script_mode": "script", "script_device_unused": "script", "profile_block": "block",
                "predicted": "prediction", "verified": "verify", "replaced": "replace", "sweep": "sweep"}
TITLE = {"scan": "live scan of", "prediction": "predicted scan of", "script": "script scan of",
         "block": "profile() block scan of", "sweep": "batch-size sweep of", "replace": "live scan of",
         "verify": "verified scan of"}


def kind_of(name: str) -> str:
    return {"predicted": "predicted", "sweep": "sweep"}.get(name, "live")


def session_kind(name: str) -> str:
    return SESSION_KIND.get(name, "scan")


def test_every_session_kind_has_a_synthetic_session():
    from dmlprof.report.model import SESSION_KINDS

    assert {session_kind(name) for name in KINDS} == set(SESSION_KINDS)


@pytest.mark.parametrize("name", list(KINDS))
def test_terminal_title_names_the_kind_of_session(name):
    text = render_text(KINDS[name]())
    assert build_report(KINDS[name]()).session_kind == session_kind(name)
    assert text.splitlines()[0].startswith(f"dmlprof {TITLE[session_kind(name)]} ")
    assert text.isascii()


@pytest.mark.parametrize("name", list(KINDS))
def test_html_title_and_flags_fit_the_kind(name):
    session = KINDS[name]()
    data = report_data(session)
    assert data["title"].startswith(f"dmlprof {TITLE[session_kind(name)]} ") and data["meta"]["mode"] == kind_of(name)
    assert data["session_kind"] == session_kind(name)
    labels = {flag["label"] for flag in data["flags"]}
    assert ("Empty" in labels) == (name == "empty")  # a sweep holds sizes, not op calls: it is not empty
    assert ("Predicted" in labels) == (name == "predicted")
    assert ("Partial session" in labels) == (name == "partial")
    html = render_html(session)
    assert f"<title>{data['title']}" in html or data["title"] in html
    # self-contained: no address of anything outside the page, no element that fetches
    assert "://" not in html and not re.search(r"<(script|link|img|iframe|object|embed)[^>]+(src|href|data)=", html)
    assert ('id="plot-throughput"' in html) == (name == "sweep")
    assert ('id="timeline"' in html) == (name not in ("sweep", "predicted", "empty"))
    assert ('id="ops-table"' in html) == (name != "sweep")


@pytest.mark.parametrize("name", list(KINDS))
def test_json_is_the_report_or_the_sweep_document(name):
    document = json.loads(render_json(KINDS[name]()))
    if name == "sweep":
        assert document["format"] == "dmlprof-sweep" and document["sweep"]["recommended_batch_size"] == 16
    else:
        assert document["schema_version"] == 1 and document["meta"]["mode"] == kind_of(name)
        assert document["summary"]["op_calls"] == len(KINDS[name]().ops)


@pytest.mark.parametrize("name", list(KINDS))
def test_tensorboard_trace_only_for_timed_calls(name, tmp_path):
    session = KINDS[name]()
    if name in ("predicted", "sweep", "empty"):  # no timed op call to lay out
        with pytest.raises(UsageError):
            write_tensorboard_run(session, tmp_path)
        return
    path = write_tensorboard_run(session, tmp_path)
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    # one range per call, and one more inside each fallback naming what went to the CPU
    fallbacks = int((session.ops["verdict"] == "fallback").sum())
    assert sum(1 for e in events if e.get("cat") == "cpu_op") == len(session.ops) + fallbacks


@pytest.mark.parametrize("name", OP_KINDS)
def test_the_three_renderers_agree_because_they_share_one_report(name):
    session = KINDS[name]()
    report = build_report(session)
    # the renderers take the Report itself: formatting it is all they do
    assert render_text(report) == render_text(session)
    assert json.loads(render_json(report)) == json.loads(render_json(session))
    data = report_data(report)
    assert [h["op"] for h in data["hotspots"]] == [h.op for h in report.hotspots]
    assert [h["op"] for h in json.loads(render_json(report))["fallbacks"]] == [h.op for h in report.hotspots]
    for hotspot in report.hotspots:
        assert hotspot.op in render_text(report)


def test_a_report_is_frozen():
    import dataclasses

    report = build_report(KINDS["live_dml"]())
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.hotspots = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.hotspots[0].calls = 0


def test_a_predictions_json_has_null_time_shares_and_a_live_ones_numbers():
    """A prediction has calls, not times: 0.0 % of op time would read as a measurement."""
    import json

    from dmlprof.render.json_report import render_json

    predicted = json.loads(render_json(KINDS["predicted"]()))
    assert predicted["summary"]["fallback_time_share"] is None and predicted["summary"]["device_time_share"] is None
    assert predicted["summary"]["fallback_call_share"] is not None  # shares of calls stay
    for section, key in (("phases", "share"), ("ops", "share"), ("fallbacks", "share"), ("modules", "device_share")):
        assert predicted[section] and all(row[key] is None for row in predicted[section]), section
    live = json.loads(render_json(KINDS["live_dml"]()))
    assert isinstance(live["summary"]["fallback_time_share"], float) and all(
        isinstance(row["share"], float) for row in live["ops"])


def test_every_renderer_gives_one_step_time_median_and_the_same_verdict_counts():
    """An even count of steps (26.4 and 1.2 ms): the median is 13.8 ms (the mean of the middle two) in the
    terminal, the HTML page and the notebook alike, and every format counts the same verdicts."""
    from dmlprof.render.notebook import notebook_html
    from session_factory import make_session

    session = make_session([{"op": "aten::mm", "time_ns": 5_000},
                            {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 9_000},
                            {"op": "aten::nonzero", "verdict": "cpu", "time_ns": 1_000}],
                           meta={"step_times_ms": [26.4, 1.2]})
    report = build_report(session)
    assert report.run.step_time_ms_p50 == pytest.approx(13.8)
    assert "step time: 13.8 ms median over 2 measured steps" in render_text(report)
    assert "13.8 ms" in render_html(report) and "26.4 ms" not in render_html(report)
    assert "13.8 ms" in notebook_html(report)
    assert report_data(report)["meta"]["step_time_ms_p50"] == pytest.approx(13.8)  # the page's data
    summary = json.loads(render_json(report))["summary"]
    assert (summary["device_calls"], summary["fallback_calls"], summary["cpu_calls"]) == (1, 1, 1)


# -- the report decides, every format shows it as it is --------------------------------------------------------
#: the verdict counts every format shows
COUNTS = ("op_calls", "device_calls", "fallback_calls", "cpu_calls", "host_bookkeeping_calls")


def _shown(text: str) -> str:
    """``text`` as the page and the notebook hold it (autoescaped)."""
    from markupsafe import escape

    return str(escape(text))


def _even_steps():
    """Two steps of 26.4 and 1.2 ms (a median of 13.8, no step's time) and a call of each verdict."""
    from session_factory import make_session

    return make_session([{"op": "aten::mm", "time_ns": 5_000},
                         {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 9_000},
                         {"op": "aten::nonzero", "verdict": "cpu", "time_ns": 1_000}],
                        meta={"step_times_ms": [26.4, 1.2]})


@pytest.mark.parametrize("name", OP_KINDS + ("even_steps",))
def test_every_format_shows_the_reports_verdict_counts_step_median_and_verdict(name):
    """GIVEN any kind of session WHEN the terminal, JSON, HTML page and notebook render its Report THEN each shows
    the Report's verdict counts, step-time median and verdict, as they are: no renderer computes its own."""
    from dmlprof.plain import plain
    from dmlprof.render.format import fmt_ms, fmt_share
    from dmlprof.render.notebook import notebook_html

    report = build_report(_even_steps() if name == "even_steps" else KINDS[name]())
    head, p50 = report.summary, report.run.step_time_ms_p50
    text, document, data = render_text(report, width=400), json.loads(render_json(report)), report_data(report)
    page, notebook = render_html(report), notebook_html(report)
    cards = {card["key"]: card for card in data["cards"]}
    # the verdict counts
    assert (f"{head.op_calls} op calls: {head.device_calls} on the device, {head.fallback_calls} fell back to the "
            f"CPU, {head.cpu_calls} on CPU tensors") in text
    assert [document["summary"][key] for key in COUNTS] == [getattr(head, key) for key in COUNTS]
    assert [data["summary"][key] for key in COUNTS] == [getattr(head, key) for key in COUNTS]
    assert cards["coverage_calls"]["detail"].startswith(f"{head.device_calls:,} of ")
    assert cards["fallback_time"]["detail"].startswith(f"{head.fallback_calls:,} calls")
    for card in ("coverage_calls", "fallback_time"):
        assert _shown(cards[card]["detail"]) in notebook and _shown(cards[card]["detail"]) in page
    split = data["charts"]["verdict_split"]
    for part in ("calls", "time"):
        assert [(p["verdict"], p["share"]) for p in split[part]] == [
            (p.verdict, p.share) for p in getattr(report.verdict_split, part)]
    # times, or none: a session without them shows no share of time anywhere (0 % of nothing is no figure)
    if report.has_times:
        assert f"{fmt_share(head.device_time_share)} of time" in text
        assert cards["coverage_time"]["value"] == fmt_share(head.device_time_share)
    else:
        assert " of time;" not in text and cards["coverage_time"]["value"] == "n/a"
        assert document["summary"]["device_time_share"] is None
    # the step-time median
    assert document["meta"]["step_time_ms_p50"] == p50 and data["meta"]["step_time_ms_p50"] == p50
    if p50 is None:
        assert "step_time" not in cards and " median over " not in text
    else:
        assert f"step time: {fmt_ms(p50)} median over " in text
        assert cards["step_time"]["value"] == fmt_ms(p50) and fmt_ms(p50) in notebook
    # the verdict
    assert document["verdict"] == data["verdict"] == plain(report.verdict)
    assert _shown(report.verdict.headline) in page and _shown(report.verdict.headline) in notebook


def test_a_sweep_says_its_recommendation_and_knee_as_its_report_does():
    report = build_report(KINDS["sweep"]())
    text = render_text(report, width=400)
    assert report.sweep.recommendation in text and report.sweep.knee_note in text
    assert report_data(report)["verdict"]["headline"] == report.verdict.headline


def test_a_merged_run_goes_through_every_renderer_as_one_value(tmp_path):
    """GIVEN a job's ranks (rank 1 straggles on a fallback; rank 2 failed) WHEN each renderer formats the one
    RunReport THEN each shows its statuses, its straggler sentence and where each step went, as the report says."""
    from dmlprof.render.notebook import notebook_html
    from dmlprof.report import merged_report
    from session_kinds import job_run, rank_session

    report = merged_report(job_run(tmp_path, {0: rank_session(0), 1: rank_session(1, fallback_ms=20.0)},
                                   errors=[(2, "rank 2: ProcessGroupGloo timed out")]))
    text, document, data = render_text(report, width=400), json.loads(render_json(report)), report_data(report)
    assert report.straggler.sentence in text and _shown(report.straggler.sentence) in render_html(report)
    assert document["schema"] == "dmlprof-distributed-report" and document["straggler"]["rank"] == 1
    assert [row["status"] for row in data["run"]["ranks"]] == [row.status for row in report.ranks] == ["ok", "ok"]
    assert [[(p["part"], p["share"]) for p in row["bar"]] for row in data["run"]["ranks"]] == [
        [(p.part.replace(" ", "-"), p.share) for p in row.step_parts] for row in report.ranks]
    assert "RANK FAILED  rank 2: ProcessGroupGloo timed out" in text
    assert data["verdict"]["tone"] == report.verdict.tone == "bad"
    assert _shown(report.verdict.headline) in notebook_html(report)


def _said(sentence: str) -> str:
    return " ".join(sentence.split())


@pytest.mark.parametrize("name", list(KINDS))
def test_terminal_page_notebook_and_json_show_the_same_notes(name):
    """Each note a report leads with is composed once (report/notes.py): every format says the same sentences."""
    from markupsafe import escape

    from dmlprof.render.notebook import notebook_html

    session = KINDS[name]()
    notes = [(note.tone, note.label, note.text) for note in build_report(session).notes]
    assert [(f["tone"], f["label"], f["text"]) for f in report_data(session)["flags"]] == notes
    assert [(n["tone"], n["label"], n["text"]) for n in json.loads(render_json(session))["notes"]] == notes
    text, cell = _said(render_text(session, width=400)), notebook_html(session)
    for _, label, sentence in notes:
        assert label.lower() in text.lower() and _said(sentence) in text, (label, sentence)
        assert str(escape(label)) in cell and str(escape(sentence)) in cell, (label, sentence)


def test_a_kind_with_something_to_say_has_notes_and_a_plain_one_none():
    # (the test above would pass on no notes at all)
    assert [n.label for n in build_report(KINDS["partial"]()).notes] == ["Partial session"]
    assert "Predicted" in [n.label for n in build_report(KINDS["predicted"]()).notes]
    assert build_report(KINDS["live_dml"]()).notes == ()


def test_a_merged_runs_notes_are_its_failed_ranks_in_every_format(tmp_path):
    from dmlprof.report import merged_report
    from session_kinds import job_run, rank_session

    run = job_run(tmp_path, {0: rank_session(0), 1: rank_session(1)}, errors=[(2, "rank 2: ProcessGroupGloo timed out")])
    report = merged_report(run)
    assert [(n.label, n.text) for n in report.notes] == [("Rank failed", "rank 2: ProcessGroupGloo timed out")]
    assert [(f["label"], f["text"]) for f in report_data(report)["flags"]] == [(n.label, n.text) for n in report.notes]
    assert "RANK FAILED  rank 2: ProcessGroupGloo timed out" in render_text(report, width=120)
