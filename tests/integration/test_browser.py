"""The HTML report in a real browser: headless Chromium through selenium + chromedriver.

Loads the file offline, checks the console has no errors, that hostile names
stay text, that the op table sorts on a header click and filters, and saves a
screenshot under test-artifacts/.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dmlprof.render.html import render_html
from conftest import require_chromium
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
    require_chromium()
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

    assert driver.find_elements(By.ID, "plot-throughput") and driver.find_elements(By.ID, "chart-ops")
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

    assert driver.find_elements(By.ID, "plot-throughput")
    assert not driver.find_elements(By.ID, "ops-table") and not driver.find_elements(By.ID, "hotspots")
    assert "batch-size sweep" in driver.find_element(By.TAG_NAME, "h1").text
    assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []


def test_a_merged_run_page_shows_its_ranks_through_the_one_report_page_without_script_errors(driver, tmp_path):
    """A launched job's ranks are one report value: the page every report has, with the sections a run has."""
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from session_kinds import job_run, rank_session
    finally:
        sys.path.remove(str(REPO / "tests"))
    from dmlprof.report import merged_report
    from selenium.webdriver.common.by import By

    folder = tmp_path / "run"
    folder.mkdir()
    report = merged_report(job_run(folder, {0: rank_session(0), 1: rank_session(1, fallback_ms=20.0)}))
    path = tmp_path / "merged.html"
    path.write_text(render_html(report), encoding="utf-8")
    _load(driver, path)
    assert "distributed run of net" in driver.find_element(By.TAG_NAME, "h1").text
    assert driver.find_element(By.ID, "verdict").text.startswith("Straggler: rank 1")
    assert [e.get_attribute("id") for e in driver.find_elements(By.TAG_NAME, "section")][1:] == [
        "ranks", "straggler", "verdict_differences", "collectives", "facts"]
    assert not driver.find_elements(By.ID, "ops-table") and not driver.find_elements(By.ID, "timeline")
    # rank 1's bar: its fallback is half of its 40 ms step, as the report says
    bar = driver.find_element(By.CSS_SELECTOR, "tr[data-rank='1'] .step-fallback")
    track = bar.find_element(By.XPATH, "..")
    assert bar.size["width"] / track.size["width"] == pytest.approx(0.5, abs=0.02)


# -- every kind of session, as a user first sees it ----------------------------------------------------------------
#: a synthetic session (tests/session_kinds.py) for each kind a report names
KIND_SESSIONS = {"scan": "live_dml", "prediction": "predicted", "script": "script_mode", "block": "profile_block",
                 "sweep": "sweep", "replace": "replaced", "verify": "verified"}
#: the words each kind's title starts with
TITLE_WORDS = {"scan": "live scan", "prediction": "predicted scan", "script": "script scan",
               "block": "profile() block scan", "sweep": "batch-size sweep", "replace": "live scan",
               "verify": "verified scan"}
#: the verdict's colour on the first screen: red only for wrong results, amber for work that left the device
#: (or fallbacks left after replacing), green for a sweep that found a size to use
FIRST_SCREEN_TONE = {"scan": "warn", "prediction": "warn", "script": "warn", "block": "warn", "sweep": "good",
                     "replace": "warn", "verify": "bad"}
#: the page's colours for each tone (report.css: --bad, --warn, --good, --info)
TONE_RGB = {"bad": (0xd1, 0x24, 0x2f), "warn": (0x9a, 0x67, 0x00), "good": (0x1a, 0x7f, 0x37), "info": (0x09, 0x69, 0xda)}
FIRST_SCREEN = (1280, 800)


def _load(driver, path):
    driver.set_window_size(*FIRST_SCREEN)
    driver.get(path.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []
    # nothing was fetched: the page is all there is
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0


def _tone_in_screenshot(driver, element, name: str) -> str:
    """The tone whose colour is nearest the element's commonest pixel in a screenshot of the first screen."""
    from io import BytesIO

    from PIL import Image

    png = driver.get_screenshot_as_png()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"first_screen_{name}.png").write_bytes(png)
    shot = Image.open(BytesIO(png)).convert("RGB")
    scale = shot.width / driver.execute_script("return window.innerWidth")
    box = driver.execute_script("var r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom];",
                                element)
    assert box[3] <= driver.execute_script("return window.innerHeight"), "the verdict is below the first screen"
    crop = shot.crop(tuple(int(v * scale) for v in box))
    colour = max(crop.getcolors(crop.width * crop.height), key=lambda pair: pair[0])[1]
    distance = {tone: sum((a - b) ** 2 for a, b in zip(colour, rgb)) for tone, rgb in TONE_RGB.items()}
    tone = min(distance, key=distance.get)
    assert distance[tone] < 30 ** 2, f"the verdict's colour {colour} is none of the page's tones"
    return tone


@pytest.mark.parametrize("kind", list(KIND_SESSIONS))
def test_each_kind_of_session_renders_as_itself_on_the_first_screen(driver, tmp_path, kind):
    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(REPO / "tests"))
    try:
        from session_kinds import KINDS
    finally:
        sys.path.remove(str(REPO / "tests"))
    # GIVEN the report of one kind of session, opened from disk in a 1280x800 window
    path = tmp_path / f"{kind}.html"
    path.write_text(render_html(KINDS[KIND_SESSIONS[kind]]()), encoding="utf-8")
    _load(driver, path)
    # THEN the title and the badge name the kind
    assert driver.title.startswith(f"dmlprof {TITLE_WORDS[kind]} of ")
    assert driver.find_element(By.CSS_SELECTOR, "header.top h1 .mode").get_attribute("data-kind") == kind
    # and the first screen's verdict is in the colour of what the run found, as the screenshot shows it
    verdict = driver.find_element(By.ID, "verdict")
    assert _tone_in_screenshot(driver, verdict, kind) == FIRST_SCREEN_TONE[kind]
    # no kind reads as an empty scan
    assert not driver.find_elements(By.CSS_SELECTOR, "[data-flag='Empty']")
    # what the kind is about is the first section after the headline figures
    first = driver.execute_script("return document.querySelector('main > section:not(#overview)').id")
    assert first == {"sweep": "sweep", "verify": "verify", "replace": "replace"}.get(kind, "charts")


def _knee_sweep_session():
    """A sweep whose throughput flattens past 32 and that ran out of memory at 128."""
    import copy

    sys.path.insert(0, str(REPO / "tests"))
    try:
        from session_kinds import sweep
    finally:
        sys.path.remove(str(REPO / "tests"))
    from dmlprof.session import Session

    base = sweep()
    data = copy.deepcopy(SWEEP)
    ok = data["rows"][0]
    data["rows"] = [dict(ok, batch_size=b, samples_per_s=r, step_ms_p95=p, peak_memory_bytes=m << 20)
                    for b, r, p, m in ((8, 100.0, 90.0, 1), (16, 180.0, 95.0, 2), (32, 300.0, 120.0, 4),
                                       (64, 305.0, 230.0, 8))]
    data["rows"].append(dict(SWEEP["rows"][2], batch_size=128))
    data.update(recommended_batch_size=32, knee_batch_size=32, memory_budget_bytes=None)
    return Session(meta=base.meta.to_dict(), **{"sweep": data})


def test_a_sweep_page_leads_with_its_recommendation_and_plots_the_knee_and_the_memory_edge(driver, tmp_path):
    from selenium.webdriver.common.by import By

    path = tmp_path / "sweep.html"
    path.write_text(render_html(_knee_sweep_session()), encoding="utf-8")
    _load(driver, path)
    assert driver.find_element(By.ID, "verdict").text.startswith("Use batch size 32")
    cards = {c.get_attribute("data-card"): c.find_element(By.CLASS_NAME, "value").text
             for c in driver.find_elements(By.CSS_SELECTOR, ".card")}
    assert cards["recommended"] == "32" and cards["knee"] == "32" and cards["oom"] == "128"
    for key in ("throughput", "p95", "memory"):
        plot = driver.find_element(By.ID, f"plot-{key}")
        # four sizes ran: four points, the recommended one marked; 128 ran out of memory: the OOM zone starts
        # between 64 and 128, and the knee's line stands at 32
        circles = plot.find_elements(By.TAG_NAME, "circle")
        assert len(circles) == 4 and len(plot.find_elements(By.CSS_SELECTOR, "circle.recommended")) == 1
        ticks = {t.text: float(t.get_attribute("x")) for t in plot.find_elements(By.TAG_NAME, "text")
                 if t.text in ("8", "16", "32", "64", "128")}
        edge = float(plot.find_element(By.CSS_SELECTOR, "line.oom-edge").get_attribute("x1"))
        assert ticks["64"] < edge < ticks["128"]
        assert float(plot.find_element(By.CSS_SELECTOR, "line.knee").get_attribute("x1")) == ticks["32"]
        assert "OOM" in plot.text and "knee" in plot.text
    assert not driver.find_elements(By.ID, "ops-table") and not driver.find_elements(By.ID, "hotspots")


# -- a real scan: its --trace file, and its page's timeline and module tree ----------------------------------------
@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    """``dmlprof scan`` of a model file on the emulated DirectML device (GroupNorm's backward falls back)."""
    from conftest import run_cli

    folder = tmp_path_factory.mktemp("scan")
    done = run_cli("scan", REPO / "models" / "groupnorm_net.py", "--device", "emulated-dml", "--steps", "2",
                   "--warmup", "0", "--trace", "trace.json", "--html", "report.html", "--out", "reports", "--quiet",
                   cwd=folder)
    assert done.returncode == 0, done.stderr
    (session_path,) = (folder / "reports").glob("*.session.json")
    from dmlprof.session import Session

    return folder, Session.load(session_path)


def test_the_trace_file_is_plain_json_with_every_call_on_its_thread_lane(scanned):
    folder, session = scanned
    trace = json.loads((folder / "trace.json").read_text(encoding="utf-8"))
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "main thread" in lanes.values()
    calls = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and not e["name"].startswith("fallback::")]
    marks = [e["name"] for e in trace["traceEvents"] if e["name"].startswith("fallback::") and e.get("cat") == "cpu_op"]
    # every fallback once more on a lane of its own, red, so they stand apart from the calls around them
    fallback_lane = [e for e in trace["traceEvents"] if e.get("cat") == "fallback"]
    assert len(calls) == len(session.ops)
    fallbacks = int((session.ops["verdict"] == "fallback").sum())
    assert len(marks) == fallbacks and len(fallback_lane) == fallbacks
    assert {e["cname"] for e in fallback_lane} == {"terrible"} and len({(e["pid"], e["tid"]) for e in fallback_lane}) == 1
    assert "fallback::aten::native_group_norm_backward" in marks
    assert all((e["pid"], e["tid"]) in lanes for e in calls)
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"
            and e["name"].startswith("ProfilerStep#")] == ["ProfilerStep#0", "ProfilerStep#1"]
    # nothing measured kernel time on the emulated device: no kernel lane is made up
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]


def test_the_timeline_draws_every_lane_and_hover_names_the_call(driver, scanned):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    folder, session = scanned
    _load(driver, folder / "report.html")
    canvas = driver.find_element(By.ID, "timeline-canvas")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    # THEN the device and fallback lanes hold pixels of their colours (the canvas, read back)
    counts = driver.execute_script("""
        var c = arguments[0], g = c.getContext('2d'), d = g.getImageData(0, 0, c.width, c.height).data, n = {device: 0, fallback: 0};
        for (var i = 0; i < d.length; i += 4) {
          if (d[i] === 0x2f && d[i + 1] === 0x81 && d[i + 2] === 0xf7) n.device++;
          if (d[i] === 0xd1 && d[i + 1] === 0x24 && d[i + 2] === 0x2f) n.fallback++;
        }
        return n;""", canvas)
    assert counts["device"] > 500 and counts["fallback"] > 20
    # WHEN the pointer rests on the middle of the longest fallback call
    page = driver.execute_script("return JSON.parse(document.getElementById('dmlprof-data').textContent).timeline")
    fallback = max((i for i, lane in enumerate(page["lane"]) if page["lanes"][lane] == "fallback"),
                   key=lambda i: page["time_ns"][i])
    middle_ns = page["start_ns"][fallback] + page["time_ns"][fallback] / 2
    start, end = float(canvas.get_attribute("data-view-start-ns")), float(canvas.get_attribute("data-view-end-ns"))
    width = canvas.size["width"]
    gutter, step_h, lane_h = 74, 18, 36  # report.js: the lane labels' gutter, the step row, a lane's height
    x = gutter + (middle_ns - start) / (end - start) * (width - gutter - 6)
    y = step_h + 1.5 * lane_h  # the middle of the fallback lane
    ActionChains(driver).move_to_element_with_offset(canvas, int(x - width / 2), int(y - canvas.size["height"] / 2)).perform()
    tip = driver.find_element(By.ID, "tl-tip")
    assert tip.is_displayed()
    assert tip.text.splitlines()[0] == page["names"][page["op"][fallback]]
    assert tip.text.splitlines()[0] in set(session.ops.loc[session.ops["verdict"] == "fallback", "op"])
    assert "fallback" in tip.text.splitlines()[1]
    # WHEN zoomed in, the view narrows around its middle
    driver.find_element(By.ID, "tl-in").click()
    narrow = float(canvas.get_attribute("data-view-end-ns")) - float(canvas.get_attribute("data-view-start-ns"))
    assert narrow == pytest.approx((end - start) / 2, rel=0.01)
    assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []


def test_the_module_tree_names_each_module_s_class(driver, scanned):
    from selenium.webdriver.common.by import By

    folder, session = scanned
    _load(driver, folder / "report.html")
    driver.find_element(By.ID, "tree-open").click()
    # each row: the open/close button's arrow, then the label
    labels = [cell.text.lstrip("\u25be\u25b8") for cell in driver.find_elements(By.CSS_SELECTOR, "#module-tree tbody td.name")]
    shown = [row[0] for row in driver.execute_script(
        "return JSON.parse(document.getElementById('dmlprof-data').textContent).modules")]
    classes = session.meta.module_classes
    assert "GroupNorm" in classes.values() and len(labels) == len(shown)
    for path, label in zip(shown, labels):
        last, name = path.rsplit(".", 1)[-1], classes.get(path)
        assert label == (f"{last} ({name})" if name and name != last else last)
    assert sum(label.endswith(" (GroupNorm)") for label in labels) >= 1
