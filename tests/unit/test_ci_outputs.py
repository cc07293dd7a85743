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
    assert [c.name for c in check_limits(report, None, None).checks] == ["calls on the device"]


def test_a_run_that_never_used_the_device_fails_whatever_the_limits():
    # GIVEN a script that put every tensor on the CPU itself: nothing on the device could fall back
    session = make_session([{"op": "aten::addmm", "time_ns": 900_000, "verdict": "cpu", "input_devices": "cpu",
                             "output_devices": "cpu"}],
                           meta={"device_unused": {"devices_used": ["cpu"], "hint": None}})
    result = check_limits(build_report(session), 1.0, 100)
    assert not result.passed and [c.name for c in result.failed] == ["calls on the device"]
    described = result.failed[0].describe()
    assert described.startswith("calls on the device 0 (limit at least 1): nothing was tested.")
    assert "was never used" in described and "put the script's model and batches on the device" in described
    from dmlprof.render.terminal import render_text

    text = render_text(session, width=200)
    assert "Fallbacks: none possible - no call ran on the device" in text and "every call on device" not in text
    text = render_check_text(result, "train.py")
    assert text.splitlines()[0].endswith("FAILED") and "FAIL  calls on the device 0" in text
    suite = ET.fromstring(junit_xml(result, "train.py").encode("utf-8")).find("testsuite")
    assert suite.get("failures") == "1" and suite.find("testcase/failure").get("message").startswith("calls on")


def test_a_run_on_the_device_passes_the_device_check():
    report = build_report(_session())
    result = check_limits(report, 0.5, 5)
    # the scan counts 'on the device' and 'fell back' apart: the check says how its figure adds them up
    s = report.summary
    assert s.device_calls and s.fallback_calls
    assert result.passed and result.checks[0].describe() == (
        f"calls on the device {s.device_calls + s.fallback_calls} = {s.device_calls} ran there + {s.fallback_calls} "
        "fell back (limit at least 1)")


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
    assert suite.get("tests") == "3"  # calls on the device, the fallback share, the ops that fell back
    assert "aten::evil%op," in suite.find("testcase/failure").text and "\\x1b" in suite.find("testcase/failure").text


def test_the_text_verdict_names_the_fix_and_the_line():
    text = render_check_text(check_limits(build_report(_session()), 0.05, None), "models/net.py")
    assert text.splitlines()[0].endswith("FAILED") and "at models/net.py:12" in text and "\x1b" not in text


@pytest.mark.parametrize("text, value", [("0.05", 0.05), ("5%", 0.05), ("0", 0.0), ("100%", 1.0)])
def test_a_share_is_a_fraction_or_a_percentage(text, value):
    assert share(text) == pytest.approx(value)


def test_a_count_of_one_is_singular():
    from dmlprof.render.format import fmt_count

    assert [fmt_count(n, "measured step") for n in (0, 1, 3)] == ["0 measured steps", "1 measured step", "3 measured steps"]
    assert fmt_count(None, "call") == "0 calls" and fmt_count(2, "proxy", "proxies") == "2 proxies"


def test_check_text_fits_the_terminal_width():
    """check's lines ran to ~250 characters: each is wrapped to the width, as the scan's report is."""
    session = make_session([{"op": "aten::addmm", "time_ns": 900_000, "verdict": "cpu", "input_devices": "cpu",
                             "output_devices": "cpu"}],
                           meta={"device_unused": {"devices_used": ["cpu"], "hint": None}})
    result = check_limits(build_report(session), 1.0, 100)
    wide = render_check_text(result, "train.py", width=400)
    assert max(len(line) for line in wide.splitlines()) > 80  # the failed limit's line is long
    text = render_check_text(result, "train.py", width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert " ".join(text.split()) == " ".join(wide.split())  # wrapped, nothing cut
