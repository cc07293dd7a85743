"""Tensors that can't answer every fact (nested tensors have no sizes) are recorded with the facts they have:
the recorder must never raise where plain torch doesn't (re-probe 12 case 1)."""
from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch")

from dmlprof.backends import resolve_backend  # noqa: E402
from dmlprof.record.journal import _meta_json  # noqa: E402
from dmlprof.record.recorder import Recorder, _facts  # noqa: E402
from dmlprof.session import Session  # noqa: E402
from session_factory import make_session  # noqa: E402


def _nested(layout):
    with warnings.catch_warnings():  # "prototype stage" of the strided layout
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.ones(2, 4), torch.ones(3, 4)], layout=layout)


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged], ids=["strided", "jagged"])
def test_a_nested_tensors_facts_are_its_components_regular_sizes_and_bytes(layout):
    """The ragged dim (no size of its own: torch raises, or names a symbol ``j1``) reads -1; the journal writes it."""
    device, dtype, shape, size = _facts(_nested(layout))
    assert (device, dtype, shape, size) == ("cpu", torch.float32, (2, -1, 4), 80)
    assert _meta_json([(device, dtype, shape, size)]) == [["cpu", "float32", [2, -1, 4], 80]]


def test_a_script_making_and_using_a_nested_tensor_runs_recorded_and_its_report_renders():
    from dmlprof.render.html import render_html
    from dmlprof.render.json_report import render_json
    from dmlprof.render.terminal import render_text

    recorder = Recorder(resolve_backend("cpu"), sync=False)
    with recorder:
        nested = _nested(torch.strided)
        sums = [part.sum().item() for part in (nested * 2).unbind()]
        projected = torch.nn.functional.linear(nested, torch.ones(3, 4))
    assert sums == [16.0, 24.0] and projected.is_nested
    nested_facts = [m for row in recorder.rows for m in row[3] + row[4] if m[2] == (2, -1, 4)]
    assert nested_facts and all(m[3] == 80 for m in nested_facts)
    ops = recorder.frame()
    assert any(json.loads(shapes) == [[2, -1, 4]] for shapes in ops["shapes"])
    session = Session(meta=make_session([]).meta, ops=ops)
    assert "aten::" in render_text(session)
    assert render_html(session).rstrip().endswith("</html>")
    assert json.loads(render_json(session))
