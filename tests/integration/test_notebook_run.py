"""A real notebook, executed by a real Jupyter kernel (nbclient + ipykernel): what a user sees in the cell.

The notebook scans a model file on the emulated DirectML device and displays the
session and its report. The executed outputs are read back: the rich view holds
the verdict, the cards, the fallback hotspots with their fixes and the top ops,
escaped; the plain view is one line.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.live]

CELLS = [
    # a scan, as a notebook user writes it, displayed as the cell's value
    "import dmlprof\n"
    "session = dmlprof.scan('models/groupnorm_net.py', device='emulated-dml', steps=1, warmup=0)\n"
    "session",
    "from dmlprof.report import build_report\nbuild_report(session)",
    # names from the model are hostile: they must reach the cell as text
    "import sys\nsys.path.insert(0, 'tests')\n"
    "from session_factory import HOSTILE, make_session\n"
    "make_session([{'op': HOSTILE, 'verdict': 'fallback', 'time_ns': 5, 'module': 'Net.' + HOSTILE}],"
    " meta={'model_name': HOSTILE})",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
    from nbclient import NotebookClient

    # a kernel of this very interpreter (a user's own "python3" kernel may be another Python)
    kernels = tmp_path_factory.mktemp("jupyter") / "kernels" / "dmlprof-test"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "dmlprof test", "language": "python"}), encoding="utf-8")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(kernels.parent.parent))
        NotebookClient(notebook, timeout=900, kernel_name="dmlprof-test",
                       resources={"metadata": {"path": str(REPO)}}).execute()
    return notebook


def _result(cell) -> dict:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, "\n".join(errors[0].traceback)
    (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    return result.data


def test_a_scan_shows_its_verdict_cards_hotspots_with_fixes_and_top_ops(executed):
    data = _result(executed.cells[0])
    html = data["text/html"]
    assert "<pre" not in html  # the report itself, not the terminal's text in a box
    assert "dmlprof live scan of groupnorm_net" in html
    # GroupNorm's backward falls back on DirectML: an amber verdict, the hotspot, and its fix inline
    assert 'class="dmlprof-verdict" data-tone="warn"' in html and "fell back to the CPU" in html
    for card in ("device", "mode", "coverage_calls", "coverage_time", "fallback_time", "step_time"):
        assert f'data-card="{card}"' in html
    hotspots = html[html.index('class="dmlprof-hotspots"'):html.index('class="dmlprof-ops"')]
    assert "aten::native_group_norm_backward" in hotspots
    assert 'class="dmlprof-fix"' in hotspots and "dmlprof.patch(model, optimizer)" in hotspots
    ops = html[html.index('class="dmlprof-ops"'):]
    assert ops.count("<tr>") == 10 + 1  # the header and the ten slowest op rows
    # no script, no stylesheet and nothing from the network: inline styles only
    assert "<script" not in html and "<style" not in html and "http" not in html
    plain = data["text/plain"]
    assert "\n" not in plain and plain.startswith("<dmlprof live session of groupnorm_net on emulated-dml: ")
    assert plain.endswith("fell back to the CPU>")


def test_a_report_value_shows_the_same_view_and_one_plain_line(executed):
    scanned = _result(executed.cells[0])["text/html"]
    data = _result(executed.cells[1])
    assert data["text/html"] == scanned
    assert "\n" not in data["text/plain"] and data["text/plain"].startswith(
        "<dmlprof live scan of groupnorm_net (on emulated-dml): ")


def test_names_from_the_model_reach_the_cell_as_text(executed):
    data = _result(executed.cells[2])
    html = data["text/html"]
    assert "<script>alert(1)</script>" not in html and "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
