"""Host bookkeeping (calls on CPU scalars only, such as an optimizer's step counters) is not a finding.

GIVEN a DirectML step whose optimizer keeps its step counters on the CPU (Adam's ``state_steps``)
WHEN its op frame is made (the verdict ``host`` is judged there, dmlprof.schema.typed_ops_frame) and the report built
THEN those calls are their own quiet category: out of every share, out of the CPU-call findings,
and every renderer (terminal, JSON, HTML data) reads the same figures.
"""
from __future__ import annotations

import json

import pytest

from dmlprof.analysis import summary
from dmlprof.render.html import report_data
from dmlprof.render.json_report import render_json
from dmlprof.render.terminal import render_text
from dmlprof.report import build_report
from session_factory import make_session


def _adam_step():
    """8 device calls, one fallback, 4 calls on the step counters, one real call on a CPU tensor."""
    counters = {"verdict": "cpu", "phase": "optimizer", "module": "optimizer.Adam", "source": "",
                "input_devices": "cpu", "output_devices": "cpu"}
    return make_session(
        [{"op": "aten::addmm", "time_ns": 100_000}] * 8
        + [{"op": "aten::_foreach_lerp_.Scalar", "verdict": "fallback", "time_ns": 50_000, "phase": "optimizer",
            "module": "optimizer.Adam",
            "fallback_ops": "aten::lerp.Scalar_out=2", "fallback_calls": 2}]
        + [dict(counters, op="aten::_foreach_add_.Scalar", time_ns=40_000, shapes="[[], []]"),
           dict(counters, op="aten::_local_scalar_dense", time_ns=30_000, shapes="[[]]"),
           dict(counters, op="aten::_local_scalar_dense", time_ns=30_000, shapes="[[]]"),
           dict(counters, op="aten::lift_fresh", time_ns=20_000, shapes="[[]]"),
           # a one-element tensor is data on the host, not a counter: still a finding
           dict(counters, op="aten::mul.Tensor", time_ns=10_000, shapes="[[1], []]", source="train.py:7")])


def test_only_calls_on_zero_dim_cpu_tensors_become_host_bookkeeping():
    judged = _adam_step().ops  # made by typed_ops_frame, as every op frame is
    assert list(judged["verdict"]).count("host") == 4
    assert judged.loc[judged["op"] == "aten::mul.Tensor", "verdict"].item() == "cpu"
    assert (judged.loc[judged["op"] == "aten::addmm", "verdict"] == "device").all()


def test_device_calls_on_scalars_and_calls_without_tensors_are_left_alone():
    ops = make_session([{"op": "aten::add_.Tensor", "time_ns": 1, "shapes": "[[]]"},  # a scalar on the device
                        {"op": "aten::scalar_tensor", "verdict": "cpu", "time_ns": 1, "shapes": "[]"}]).ops
    assert list(ops["verdict"]) == ["device", "cpu"]


def test_shares_leave_host_bookkeeping_out_of_both_sides():
    numbers = summary(_adam_step().ops)
    assert numbers["host_bookkeeping_calls"] == 4 and numbers["cpu_calls"] == 1
    assert numbers["op_calls"] == 14 == sum(numbers[k] for k in ("device_calls", "fallback_calls", "cpu_calls",
                                                                  "host_bookkeeping_calls"))
    assert numbers["device_call_share"] == pytest.approx(8 / 10)  # 14 calls less 4 counters
    assert numbers["device_time_share"] == pytest.approx(800 / 860)  # 980 us less 120 us of counters
    assert numbers["host_bookkeeping_time_ms"] == pytest.approx(0.12)


def test_the_report_lists_bookkeeping_apart_from_the_findings():
    report = build_report(_adam_step())
    assert [r.op for r in report.host_calls] == ["aten::mul.Tensor"]
    assert {r.op for r in report.host_bookkeeping} == {"aten::_foreach_add_.Scalar", "aten::_local_scalar_dense",
                                                        "aten::lift_fresh"}
    assert sum(r.calls for r in report.host_bookkeeping) == 4
    # the optimizer's module is judged on its work: 50 us fell back, 10 us ran on the host
    adam = next(m for m in report.modules if m.module == "optimizer.Adam")
    assert adam.fallback_share == pytest.approx(50 / 60) and adam.cpu_share == pytest.approx(10 / 60)
    assert report.hotspots[0].share == pytest.approx(50 / 860)


def test_every_renderer_shows_the_same_shares():
    session = _adam_step()
    document = json.loads(render_json(session))
    assert document["summary"]["device_call_share"] == pytest.approx(0.8)
    assert [r["op"] for r in document["cpu_calls"]] == ["aten::mul.Tensor"]
    assert len(document["host_bookkeeping"]) == 3
    cards = {card["key"]: card for card in report_data(session)["cards"]}
    assert cards["coverage_calls"]["value"] == "80.0%" and cards["coverage_time"]["value"] == "93.0%"
    text = render_text(session, width=100)
    assert "device share: 80.0% of calls, 93.0% of time" in text
    assert "4 host bookkeeping" in text and "Host bookkeeping, not a finding: 4 calls" in text
    findings = text.split("Calls on CPU tensors inside the step")[1].split("\n\n")[0]
    assert "aten::mul.Tensor" in findings and "lift_fresh" not in findings


def test_the_ops_table_leaves_host_bookkeeping_to_its_own_line():
    """By calls (a prediction), 52 step-counter reads would lead the table the same report calls 'not a finding'."""
    counters = {"verdict": "cpu", "phase": "optimizer", "module": "optimizer.Adam", "source": "",
                "input_devices": "cpu", "output_devices": "cpu", "op": "aten::_local_scalar_dense", "shapes": "[[]]",
                "time_ns": 0}
    session = make_session([{"op": "aten::addmm", "time_ns": 0}] * 3 + [counters] * 52, meta={"mode": "predicted"})
    text = render_text(session, width=120)
    table = text[text.index("Ops by calls"):].splitlines()
    assert table[0].startswith("Ops by calls (top 1 of 1)") and table[3].startswith("aten::addmm")
    assert "_local_scalar_dense" not in "\n".join(table[:4]) and "Host bookkeeping, not a finding: 52 calls" in text
