"""``dmlprof check``'s verdict and CI outputs, over synthetic sessions: limits, escapes, valid XML."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from dmlprof.cli.check import share
from dmlprof.render.ci import github_annotations, junit_xml, render_check_text
from dmlprof.report import build_report
from dmlprof.report.gate import check_limits
from session_factory import make_session

HOSTILE_OP = "aten::evil%op,\nname:<x>\x1b[31m"


def _session(source="models/net.py:12"):
    return make_session([
        {"op": "aten::addmm", "time_ns": 900_000},
        {"op": HOSTILE_OP, "verdict": "fallback", "time_ns": 100_000, "source": source, "module": "Net.a,b"},
    ])


def test_limits_pass_at_the_limit_and_fail_past_it():
    report = build_report(_session())
    assert check_limits(report, 0.10, 1).passed  # 10% of op time fell back, one op
    failed = check_limits(report, 0.05, 0)
    assert not failed.passed and [c.name for c in failed.failed] == ["fallback share of op time", "ops that fell back"]
    assert failed.failed[0].describe() == "fallback share of op time 10.0% (limit 5.0%)"
    assert check_limits(report, None, None).checks == ()


def test_annotations_escape_what_github_reads_as_syntax():
    result = check_limits(build_report(_session()), 0.05, None)
    first = github_annotations(result).splitlines()[0]
    assert first.startswith("::error file=models/net.py,line=12,title=dmlprof%3A aten%3A%3Aevil%25op%2C%0Aname%3A")
    message = first.split("::", 2)[2]
    assert "%25op," in message and "%0A" in message and "\n" not in first and "\x1b" not in first


def test_a_passing_check_warns_about_each_fallback_instead_of_failing():
    lines = github_annotations(check_limits(build_report(_session()), 0.5, 5)).splitlines()
    assert len(lines) == 1 and lines[0].startswith("::warning file=models/net.py,line=12,")


def test_a_source_that_is_no_file_line_gives_an_annotation_without_a_place():
    result = check_limits(build_report(_session(source="")), 0.05, None)
    assert github_annotations(result).splitlines()[0].startswith("::error title=")


def test_junit_is_valid_xml_whatever_the_names_hold():
    result = check_limits(build_report(_session()), 0.05, 0)
    root = ET.fromstring(junit_xml(result, "models/<net>.py").encode("utf-8"))
    suite = root.find("testsuite")
    assert suite.get("name") == "dmlprof check models/<net>.py" and suite.get("failures") == "2"
    assert "aten::evil%op," in suite.find("testcase/failure").text and "\\x1b" in suite.find("testcase/failure").text


def test_the_text_verdict_names_the_fix_and_the_line():
    text = render_check_text(check_limits(build_report(_session()), 0.05, None), "models/net.py")
    assert text.splitlines()[0].endswith("FAILED") and "at models/net.py:12" in text and "\x1b" not in text


@pytest.mark.parametrize("text, value", [("0.05", 0.05), ("5%", 0.05), ("0", 0.0), ("100%", 1.0)])
def test_a_share_is_a_fraction_or_a_percentage(text, value):
    assert share(text) == pytest.approx(value)
