"""``scan --replace``'s comparison: counted in the plain scan's unit, ratios in words, emulated times flagged."""
from __future__ import annotations

import pytest

from dmlprof.analysis import summary
from dmlprof.analysis.replace import replace_comparison, run_numbers
from dmlprof.render.terminal import render_text
from dmlprof.report import build_report
from session_factory import fallback_mix
from session_kinds import KINDS, _changed


def test_both_sides_count_calls_as_the_plain_scan_does():
    ops = fallback_mix().ops  # 2 cumsum calls and one _foreach_lerp_ whose lerp fell back 4 times inside
    side = run_numbers(ops, steps=1, step_times_ms=[10.0])
    assert side["fallback_calls"] == summary(ops)["fallback_calls"] == 3
    assert side["inner_fallback_calls"] == 2 + 4
    assert side["fallback_ops"] == {"aten::cumsum": 2, "aten::_foreach_lerp_.Scalar": 1}
    assert side["inner_ops"]["aten::_foreach_lerp_.Scalar"] == ["aten::lerp.Scalar_out"]


def test_remaining_ops_get_the_advice_of_what_they_sent_to_the_cpu():
    side = run_numbers(fallback_mix().ops, steps=1, step_times_ms=[10.0])
    advice = {"aten::lerp.Scalar_out": "patch the optimizer"}.get
    remaining = replace_comparison(side, side, [], advice)["remaining_ops"]
    assert {r["op"]: r["replacement"] for r in remaining} == {"aten::cumsum": None,
                                                               "aten::_foreach_lerp_.Scalar": "patch the optimizer"}


@pytest.mark.parametrize("speedup, words", [(1.6, "1.60x faster"), (0.44, "2.27x slower"), (1.0, "1.00x faster")])
def test_the_direction_of_the_step_time_ratio_is_spelled_out(speedup, words):
    session = KINDS["replaced"]()
    session.extras["replace"]["step_time_speedup"] = speedup
    text = render_text(session, width=120)
    assert f"step time: {words} after patching" in text
    assert f"({speedup:.2f}x)" not in text


def test_without_a_step_time_on_one_side_there_is_no_ratio():
    session = KINDS["replaced"]()
    session.extras["replace"]["step_time_speedup"] = None
    session.extras["replace"]["after"]["step_time_ms"] = None
    text = render_text(session, width=120)
    assert "after patching" in text and "faster" not in text and "slower" not in text


def test_emulated_times_are_flagged_as_host_cpu_times():
    plain = render_text(KINDS["replaced"](), width=120)
    emulated = _changed(KINDS["replaced"](), backend="emulated-dml")
    emulated.replace = KINDS["replaced"]().replace
    assert "host CPU's" not in plain and "host CPU's" in " ".join(render_text(emulated, width=120).split())


def test_the_comparison_comes_before_the_patched_run_and_titles_it():
    report = build_report(KINDS["replaced"]())
    text = render_text(report, width=120)
    assert report.title.endswith("before and after dmlprof's replacements")
    assert text.index("Before and after") < text.index("The patched run in detail:") < text.index("op calls:")


def test_the_page_gives_the_emulated_devices_speed_up_the_terminals_caveat():
    """'1.60x faster' on the emulated device is the host CPU's: the page says so, as the terminal does."""
    from dmlprof.render.html import render_html, report_data

    session = KINDS["replaced"]()
    session.meta = session.meta.updated(device=session.meta.device.__class__(
        **{**vars(session.meta.device), "backend": "emulated-dml"}))
    data = report_data(session)
    assert "the host CPU's" in data["verdict"]["detail"] and "the host CPU's" in data["replace"]["times_note"]
    assert 'id="replace-times-note"' in render_html(session)
    assert "the host CPU's" in render_text(session, width=200)
    on_gpu = report_data(KINDS["replaced"]())  # a real device's times need no caveat
    assert on_gpu["replace"]["times_note"] is None and "host CPU" not in on_gpu["verdict"]["detail"]


def _nothing_fell_back(session):
    for side in ("before", "after"):
        numbers = session.extras["replace"][side]
        numbers.update(fallback_calls=0, inner_fallback_calls=0, fallback_calls_per_step=0.0, fallback_ops={})
    session.extras["replace"]["remaining_ops"] = []
    session.extras["replace"]["step_time_speedup"] = 1 / 42.73
    return session


def test_with_nothing_to_replace_it_says_so_instead_of_a_speed_ratio():
    """GIVEN --replace where nothing fell back before patching (the CPU) THEN 'nothing to replace', no 'x slower'."""
    from dmlprof.report.verdict import verdict_of

    session = _nothing_fell_back(KINDS["replaced"]())
    text = " ".join(render_text(session, width=100).split())
    assert "nothing to replace" in text.lower()
    assert "slower" not in text and "faster" not in text
    verdict = verdict_of(build_report(session))
    assert verdict.headline.startswith("Nothing to replace") and "slower" not in verdict.detail


def test_counts_are_singular_for_one_and_step_times_share_a_unit():
    session = KINDS["replaced"]()
    data = session.extras["replace"]
    data["applied"] = data["applied"][:1]
    data["remaining_ops"] = [{"op": "aten::cumsum", "calls": 1, "replacement": None}]
    data["after"]["fallback_calls"] = 1
    data["before"]["step_time_ms"], data["after"]["step_time_ms"] = 1500.0, 800.0
    text = render_text(session, width=200)
    assert "(1 change:" in text and "aten::cumsum (1 call)" in text
    assert "1 changes" not in text and "1 calls" not in text
    assert "1.50 s" in text and "0.80 s" in text and "800.0 ms" not in text
