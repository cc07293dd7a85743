"""The HTML report in a real browser: headless Chromium through selenium + chromedriver.

Loads the file offline, checks the console has no errors, that hostile names
stay text, that the op table sorts on a header click and filters, and saves a
screenshot under test-artifacts/.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from dmlprof.render.html import render_html
from session_factory import HOSTILE, SWEEP, make_session

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"

pytestmark = pytest.mark.slow


def _report_session():
    calls = []
    for step in range(2):
        calls += [
            {"op": "aten::convolution", "time_ns": 40_000, "module": "Net.features.0", "step": step},
            {"op": "aten::relu", "time_ns": 3_000, "module": "Net.features.1", "step": step},
            {"op": "aten::cumsum", "verdict": "fallback", "time_ns": 25_000, "module": "Net.pool", "bytes_moved": 1 << 16,
             "step": step, "source": "models/net.py:31"},
            {"op": "aten::addmm", "time_ns": 12_000, "module": f"Net.{HOSTILE}", "step": step},
            {"op": HOSTILE, "verdict": "fallback", "time_ns": 1_000, "module": "Net.head", "step": step},
            {"op": "aten::convolution_backward", "time_ns": 70_000, "phase": "backward", "module": "Net.features.0", "step": step},
            {"op": "aten::_foreach_lerp_.Scalar", "verdict": "fallback", "time_ns": 60_000, "phase": "optimizer",
             "module": "", "source": "train.py:40", "fallback_ops": "aten::lerp.Scalar_out=8", "fallback_calls": 8, "step": step},
            {"op": "aten::nonzero", "verdict": "cpu", "time_ns": 500, "module": "Net.pool", "step": step},
        ]
    return make_session(calls, meta={"model_name": f"net{HOSTILE}", "step_times_ms": [0.5, 0.4]}, extras={"sweep": SWEEP})


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if not (shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")):
        pytest.fail("Chromium is not installed (apt-get install chromium chromium-driver; .ci/run does it)")
    if not shutil.which("chromedriver"):
        pytest.fail("chromedriver is not installed (apt-get install chromium-driver; .ci/run does it)")
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from report_scale import chromium_driver
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    web = chromium_driver(str(tmp_path_factory.mktemp("chromium-profile")))
    yield web
    web.quit()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render_html(_report_session()), encoding="utf-8")
    return path


def _op_column(driver):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#ops-table tbody tr:not(.hidden) td:first-child'))"
        ".map(td => td.firstChild.textContent);")


def test_report_loads_sorts_filters_and_keeps_names_as_text(driver, report):
    from selenium.webdriver.common.by import By

    # GIVEN the report opened from disk
    driver.get(report.resolve().as_uri())
    # THEN the page's script ran without an error
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []
    assert driver.execute_script("return document.readyState") == "complete"
    # a name that is markup is shown as text, and no script from it exists or ran
    assert driver.execute_script("return document.querySelectorAll('script').length") == 2
    assert driver.execute_script("return document.querySelectorAll('img').length") == 0
    assert HOSTILE in driver.find_element(By.CSS_SELECTOR, "header.top h1").text
    assert HOSTILE in _op_column(driver)
    assert HOSTILE in driver.find_element(By.ID, "module-tree").text

    # the table starts sorted by time, slowest first
    before = _op_column(driver)
    assert before[0] == "aten::convolution_backward"
    header = driver.find_element(By.CSS_SELECTOR, "#ops-table th[data-key='op']")
    # WHEN the op header is clicked
    header.click()
    after = _op_column(driver)
    # THEN the rows are in name order, and the header says so
    assert after != before and after == sorted(before)
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert _op_column(driver) == sorted(before, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"

    # WHEN filtered to fallbacks
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "ops-verdict")).select_by_value("fallback")
    assert sorted(_op_column(driver)) == sorted([HOSTILE, "aten::cumsum", "aten::_foreach_lerp_.Scalar"])
    box = driver.find_element(By.ID, "ops-filter")
    box.send_keys("cumsum")
    assert _op_column(driver) == ["aten::cumsum"]
    assert driver.find_element(By.ID, "ops-count").text == f"1 of {len(before)} rows"
    box.clear()
    box.send_keys(" ")  # an input event with an empty filter shows the verdict's rows again
    assert len(_op_column(driver)) == 3

    # the module tree closes and opens
    rows_shown = "return Array.from(document.querySelectorAll('#module-tree tbody tr')).filter(r => !r.classList.contains('hidden')).length"
    total = driver.execute_script("return JSON.parse(document.getElementById('dmlprof-data').textContent).modules.length")
    assert total == 8  # (outside modules), Net, Net.features, .features.0, .features.1, .pool, .head, the hostile one
    assert driver.execute_script(rows_shown) == total
    driver.find_element(By.ID, "tree-close").click()
    assert driver.execute_script(rows_shown) < total
    driver.find_element(By.ID, "tree-open").click()
    assert driver.execute_script(rows_shown) == total

    assert driver.find_elements(By.ID, "chart-sweep") and driver.find_elements(By.ID, "chart-ops")
    assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []

    # a screenshot as a test artifact (the whole page)
    ARTIFACTS.mkdir(exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 40, 6000))
    driver.execute_script("window.scrollTo(0, 0)")
    shot = ARTIFACTS / "html_report.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_a_sweep_page_shows_the_sweep_without_scan_sections_or_script_errors(driver, tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from session_kinds import sweep
    finally:
        sys.path.remove(str(REPO / "tests"))
    path = tmp_path / "sweep.html"
    path.write_text(render_html(sweep()), encoding="utf-8")
    driver.get(path.as_uri())
    from selenium.webdriver.common.by import By

    assert driver.find_elements(By.ID, "chart-sweep")
    assert not driver.find_elements(By.ID, "ops-table") and not driver.find_elements(By.ID, "hotspots")
    assert "batch-size sweep" in driver.find_element(By.TAG_NAME, "h1").text
    assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []
