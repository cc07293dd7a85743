"""``dmlprof check``'s outputs for CI: a short text verdict, GitHub Actions annotations, JUnit XML.

Annotations follow GitHub's workflow-command syntax
(``::error file=F,line=L,title=T::message``), with its escapes: ``%``, CR and
LF in the message, and also ``:`` and ``,`` in properties. JUnit XML is written
with xml.etree, which escapes markup; control characters, which XML 1.0 cannot
hold at all, are shown as ``\\xNN`` first (:func:`~dmlprof.render.format.clean`).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional, Tuple

from dmlprof.render.format import clean, fmt_count, fmt_list, fmt_share, terminal_width, wrap_line
from dmlprof.report.targets import device_and_torch
from dmlprof.report.gate import GateResult


def render_check_text(result: GateResult, model: str, width: Optional[int] = None) -> str:
    """The verdict, one line per limit, then each hotspot with where it comes from and its fix; each line wrapped
    to ``width`` (default: the terminal's, as the scan's report)."""
    width = terminal_width(width)
    return "\n".join(part for line in _check_lines(result, model) for part in wrap_line(clean(line), width))


def _check_lines(result: GateResult, model: str) -> list:
    report = result.report
    device = device_and_torch(report)
    lines = [f"dmlprof check {model} on {device}: {'passed' if result.passed else 'FAILED'}"]
    lines += [f"  {_mark(check)}  {check.describe()}" for check in result.checks]
    lines += [line for hotspot in result.hotspots for line in _counted_lines(hotspot, report.timed)]
    return lines + _uncounted_lines(report, result) + [_wrong_line(known) for known in report.known_wrong_results]


def _uncounted_lines(report, result: GateResult) -> list:
    return [f"  not counted: {hotspot.op} ({hotspot.torch_flag}; --count-torch-only counts it)"
            for hotspot in report.hotspots if hotspot not in result.hotspots]


def _wrong_line(known) -> str:
    where = fmt_list(known.sources, 2) or fmt_list(known.modules, 1) or "no source line"
    said = "may be wrong" if known.unjudged else "wrong"
    return f"  {said} on DirectML: {known.op} x{known.calls} at {where}: {known.consequence or known.reason}"


def _mark(check) -> str:
    return "ok  " if check.passed else "FAIL"


def _counted_lines(hotspot, timed: bool) -> list:
    """A hotspot the check counted: where it falls back, and its first fix."""
    where = fmt_list(hotspot.sources, 2) or fmt_list(hotspot.modules, 1) or "no source line"
    return ([f"  fell back: {_hotspot_line(hotspot, timed)} at {where}"]
            + [f"    fix: {fix.advice}" for fix in hotspot.fixes[:1]])


def _hotspot_line(hotspot, timed: bool) -> str:
    inner = [op for op in hotspot.inner_ops if op != hotspot.op]
    name = hotspot.op + (f" -> {', '.join(inner)}" if inner else "")
    calls = fmt_count(hotspot.calls, "call")
    inner = f", {hotspot.inner_calls} inner" if hotspot.inner_calls != hotspot.calls else ""
    return f"{name} ({calls}{inner}" + (f", {fmt_share(hotspot.share)} of op time)" if timed else ")")


def github_annotations(result: GateResult) -> str:
    """One workflow command per fallback hotspot, on its source line where one is known.

    ``error`` when the check failed, ``warning`` when the fallbacks stayed within the limits.
    """
    level = "warning" if result.passed else "error"
    lines = [_annotation(level, _location(hotspot.sources), f"dmlprof: {hotspot.op} falls back to the CPU",
                         _annotation_message(hotspot, result)) for hotspot in result.hotspots]
    wrong_level = "error" if any(c.name == "calls with known wrong results" and not c.passed
                                 for c in result.checks) else "warning"
    lines += [_wrong_annotation(known, wrong_level) for known in result.report.known_wrong_results]
    if not result.passed:
        lines.append(_annotation("error", None, "dmlprof check failed",
                                 "; ".join(check.describe() for check in result.failed)))
    return "\n".join(lines)


def _wrong_annotation(known, level: str) -> str:
    """A call that may be wrong (an argument that decides it unread) is a warning whatever the check says."""
    said = "may give" if known.unjudged else "gives"
    return _annotation("warning" if known.unjudged else level, _location(known.sources),
                       f"dmlprof: {known.op} {said} wrong results on DirectML", _wrong_message(known))


def _wrong_message(known) -> str:
    text = known.consequence or known.reason or "results differ from the CPU's"
    return text + (f" ({known.klass})" if known.klass else "") + (f" Fix: {known.fix}" if known.fix else "")


def _annotation_message(hotspot, result: GateResult) -> str:
    text = f"{_hotspot_line(hotspot, result.report.timed)} in {fmt_list(hotspot.modules, 2) or 'no module'}."
    return text + (f" Fix: {hotspot.fixes[0].advice}" if hotspot.fixes else "")


def _location(sources) -> Optional[Tuple[str, int]]:
    """(file, line) of the first ``file:line`` source, as a path relative to here when it is under here."""
    for source in sources:
        path, _, line = str(source).rpartition(":")
        if path and line.isdigit():
            return _relative(path), int(line)
    return None


def _relative(path: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):
        return Path(path).as_posix()


def _annotation(level: str, location, title: str, message: str) -> str:
    properties = ([f"file={_escape_property(location[0])}", f"line={location[1]}"] if location else [])
    properties.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(properties)}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    return clean(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def junit_xml(result: GateResult, model: str, error: Optional[str] = None) -> str:
    """A JUnit XML document: one test case per limit, failing with the hotspots behind it; with ``error``
    (the loss went NaN), one more case in error, since the gate's verdict rests on a diverging run."""
    suite = ET.Element("testsuite", name=clean(f"dmlprof check {model}"), tests=str(len(result.checks)),
                       failures=str(len(result.failed)), errors="0")
    for check in result.checks:
        case = ET.SubElement(suite, "testcase", classname="dmlprof.check", name=clean(check.name))
        if not check.passed:
            failure = ET.SubElement(case, "failure", message=clean(check.describe()), type="LimitExceeded")
            failure.text = render_check_text(result, model)
    if error is not None:
        _error_case(suite, "training run", error)
    return _document(suite)


def junit_error_xml(model: str, error: str) -> str:
    """A JUnit XML document for a check that could not run the model: one test case, in error."""
    suite = ET.Element("testsuite", name=clean(f"dmlprof check {model}"), tests="0", failures="0", errors="0")
    _error_case(suite, "running the model", error)
    return _document(suite)


def _error_case(suite, name: str, error: str) -> None:
    suite.set("tests", str(int(suite.get("tests")) + 1))
    suite.set("errors", str(int(suite.get("errors")) + 1))
    case = ET.SubElement(suite, "testcase", classname="dmlprof.check", name=name)
    ET.SubElement(case, "error", message=clean(error), type="ModelFailed").text = clean(error)


def _document(suite) -> str:
    suites = ET.Element("testsuites")
    suites.append(suite)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
