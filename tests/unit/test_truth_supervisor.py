"""The truth generator's health checks (tools/realdml/truth_supervisor.py), with fake workers.

GIVEN fake workers scripted like real torch-directml misbehaving: a sample that removes the device (its
      health probe fails after it, every later call would fail), a process that aborts only after earlier
      work (heap corruption), a device that is unhealthy in every fresh worker
WHEN  the supervisor measures samples through them
THEN  the sample that removes the device is re-run alone and recorded as "device_lost" (no later sample is
      blamed), an abort seen after earlier work is re-run alone and only an abort alone is the sample's,
      every result says it was followed by a passing probe, and the shipped table holds no entry measured
      after a device loss.
Cheap (no torch, no device): runs in every CI lane.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "realdml"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


supervisor = _load("truth_supervisor")
table_health = _load("truth_table_health")


class FakeDevice:
    """A device shared by the workers of one test: ``lost`` until a fresh worker resets it (as a real
    removed device is gone for its process only), unless ``always_lost``."""

    def __init__(self, loses=(), aborts_after_work=(), aborts=(), always_lost=False, verifier_aborts=()):
        self.loses, self.aborts_after_work, self.aborts = set(loses), set(aborts_after_work), set(aborts)
        self.verifier_aborts = set(verifier_aborts)  # end the process under the recorder only
        self.always_lost = always_lost
        self.workers: list = []


class FakeWorker:
    def __init__(self, device: FakeDevice, keys: list, order: str):
        self.device, self.keys, self.order = device, keys, order
        self.status = "exit 0"
        device.workers.append((list(keys), order))

    def events(self):
        lost = self.device.always_lost
        yield {"probe": not lost, "after": "start"}
        if lost:
            self.status = "exit 3"
            return
        yield {"adapter": "fake adapter"}
        for position, key in enumerate(self.keys, 1):
            yield {"start": key}
            ended = False
            for phase in (("clean", "recorded") if self.order == "clean-first" else ("recorded", "clean")):
                yield {"phase": phase}
                if phase == "recorded":
                    yield {"call": f"aten::{key}", "dtypes": ["float32"]}
                if (key in self.device.aborts or (key in self.device.aborts_after_work and position > 1)
                        or (phase == "recorded" and key in self.device.verifier_aborts)):
                    ended = True
                    break
            if ended:
                self.status = "SIGABRT"
                return
            if lost:  # every call on a removed device fails, each under its own name
                yield {"done": key, "outcome": "raises", "message": "RuntimeError: Unknown error -2005270523",
                       "failed_op": f"aten::{key}", "calls": [[f"aten::{key}", "device", "", "float32"]]}
                continue
            if key in self.device.loses:
                lost = True
                yield {"probe": False, "after": "recorded", "message": "RuntimeError: Unknown error -2005270523"}
                yield {"done": key, "outcome": "unhealthy", "failed_op": f"aten::{key}", "message": "probe failed"}
                self.status = "exit 3"
                return
            yield {"probe": True, "after": "recorded"}
            yield {"done": key, "outcome": "ok", "calls": [[f"aten::{key}", "device", "", "float32"]]}

    def exit_status(self) -> str:
        return self.status


def _measure(device: FakeDevice, keys: list, **kwargs) -> dict:
    spawn = lambda keys, env, order: FakeWorker(device, keys, order)  # noqa: E731
    return supervisor.Supervisor(spawn, {}, log=lambda line: None, **kwargs).measure(keys)


def test_a_sample_that_removes_the_device_is_device_lost_and_blames_no_later_sample():
    device = FakeDevice(loses={"layer_norm"})
    results = _measure(device, ["add", "layer_norm", "mul", "sub"])
    assert results["layer_norm"]["outcome"] == "device_lost"
    assert results["layer_norm"]["failed_op"] == "aten::layer_norm"
    assert results["layer_norm"]["measured"]["probe_after"] is False
    for key in ("add", "mul", "sub"):  # later samples ran on a fresh device, not the lost one
        assert results[key]["outcome"] == "ok", results[key]
        assert results[key]["measured"]["probe_after"] is True
    # the losing sample was re-run alone, in a fresh worker of its own
    assert (["layer_norm"], "recorded-first") in device.workers


def test_a_device_lost_once_only_is_not_the_samples_finding():
    class LosesOnce(FakeDevice):
        pass

    device = LosesOnce(loses={"mul"})
    first = FakeWorker.events

    def events(self):  # the device is lost after "mul" in its first worker only
        if len(self.device.workers) > 1:
            self.device.loses.discard("mul")
        yield from first(self)

    FakeWorker.events, saved = events, FakeWorker.events
    try:
        results = _measure(device, ["add", "mul", "sub"])
    finally:
        FakeWorker.events = saved
    assert results["mul"]["outcome"] == "ok" and results["mul"]["measured"]["attempts"] == 2
    assert "re-run alone" in results["mul"]["note"]


def test_an_abort_after_earlier_work_is_re_run_alone_and_not_blamed():
    device = FakeDevice(aborts_after_work={"flip"})
    results = _measure(device, ["add", "flip", "mul"])
    assert results["flip"]["outcome"] == "ok"
    assert results["flip"]["measured"]["alone"] is True and results["flip"]["measured"]["attempts"] == 2
    assert results["mul"]["outcome"] == "ok"


def test_an_abort_alone_is_the_samples_at_the_call_it_was_making():
    device = FakeDevice(aborts={"eye"})
    results = _measure(device, ["add", "eye", "mul"])
    assert results["eye"]["outcome"] == "aborts" and results["eye"]["signal"] == "SIGABRT"
    assert results["eye"]["failed_op"] == "aten::eye"
    assert results["mul"]["outcome"] == "ok"


def test_an_abort_only_under_the_recorder_is_not_directmls():
    device = FakeDevice(verifier_aborts={"max_pool2d"})
    results = _measure(device, ["add", "max_pool2d", "mul"])
    assert results["max_pool2d"]["outcome"] == "aborts_under_recorder"
    assert (["max_pool2d"], "clean-first") in device.workers  # confirmed without the recorder first


def test_a_device_unhealthy_in_every_fresh_worker_stops_without_blaming_ops():
    results = _measure(FakeDevice(always_lost=True), ["add", "mul"])
    assert {r["outcome"] for r in results.values()} == {"not_measured"}


def test_results_are_journaled_as_they_are_decided(tmp_path):
    journal = tmp_path / "journal.jsonl"
    _measure(FakeDevice(aborts={"eye"}), ["add", "eye"], journal=journal)
    lines = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
    assert [line["key"] for line in lines] == ["add", "eye"]


# -- the shipped table ------------------------------------------------------------------------------------
def _entry(**fields) -> dict:
    return {"calls": 1, "device": 1, "fallback": 0, "raises": 0, "aborts": 0, "wrong": 0, "messages": [],
            "samples": ["x|float32|0"], **fields}


@pytest.mark.parametrize("entry, problem", [
    (_entry(raises=1, messages=["RuntimeError: Unknown error -2005270523"]), "device was removed"),
    (_entry(measured={"generator": 2, "samples": 2, "probed": 1, "after_device_loss": 0}), "without a passing"),
    (_entry(measured={"generator": 2, "samples": 2, "probed": 2, "after_device_loss": 1}), "after a device loss"),
])
def test_the_table_check_refuses_an_entry_measured_after_a_device_loss(entry, problem):
    found = table_health.problems({"ops": {"aten::x": {"float32": entry}}})
    assert found and problem in found[0], found


def test_the_table_check_passes_a_healthy_entry():
    healthy = _entry(measured={"generator": 2, "samples": 2, "probed": 2, "after_device_loss": 0})
    assert table_health.problems({"ops": {"aten::x": {"float32": healthy}}}) == []


def test_the_shipped_table_has_no_entry_measured_after_a_device_loss():
    from dmlprof.tables.measured import SHIPPED
    from dmlprof.tables import DATA_DIR

    document = json.loads((DATA_DIR / SHIPPED["dml"]).read_text(encoding="utf-8"))
    assert table_health.problems(document) == []


# -- merging a re-measure into the shipped table ------------------------------------------------------------
merge = _load("merge_truth")
MEASURED = {"generator": 2, "adapter": "fake adapter", "probe_after": True, "alone": False, "attempts": 1}


def _old_table_and_truth():
    calls = [["aten::masked_fill_.Tensor", "device", "", "bool,float32"]]
    old_samples = {f"m|float32|{i}": {"outcome": "ok", "calls": calls} for i in range(3)}
    section = {"aten::masked_fill_.Tensor": {"bool,float32": {
        "calls": 3, "device": 3, "fallback": 0, "raises": 0, "aborts": 0, "wrong": 3, "max_abs_error": 1.0,
        "max_rel_error": 1.0, "messages": ["values differ beyond tolerance"], "samples": sorted(old_samples)}}}
    return section, old_samples, calls


def test_a_fully_re_measured_entry_is_replaced_and_says_how_it_was_measured():
    section, old_samples, calls = _old_table_and_truth()
    new = {key: {"outcome": "ok", "calls": calls, "divergent": [], "measured": MEASURED} for key in old_samples}
    merged, report = merge.merge_section(section, old_samples, new, "2026-12-06")
    entry = merged["aten::masked_fill_.Tensor"]["bool,float32"]
    assert entry["wrong"] == 0 and entry["calls"] == 3
    assert entry["measured"]["remeasured"] == "whole" and entry["measured"]["probed"] == 3
    assert table_health.problems({"ops": merged}) == []


def test_a_partly_re_measured_entry_keeps_the_others_counts():
    section, old_samples, calls = _old_table_and_truth()
    key = "m|float32|0"
    new = {key: {"outcome": "ok", "calls": calls + calls, "divergent": [], "measured": MEASURED}}
    merged, _ = merge.merge_section(section, old_samples, new, "2026-12-06")
    entry = merged["aten::masked_fill_.Tensor"]["bool,float32"]
    assert entry["calls"] == 4  # 2 not re-measured + 2 new
    assert entry["wrong"] == 2  # every sample was named: the re-measured one's wrong call is gone
    assert entry["measured"]["remeasured"] == "part"


def test_a_sample_that_lost_the_device_counts_as_device_lost_only():
    section, old_samples, calls = _old_table_and_truth()
    new = {"m|float32|0": {"outcome": "device_lost", "failed_op": "aten::native_layer_norm_backward",
                           "failed_dtypes": "float32", "calls": calls, "measured": {**MEASURED, "probe_after": False}}}
    merged, _ = merge.merge_section(section, old_samples, new, "2026-12-06")
    assert merged["aten::native_layer_norm_backward"]["float32"]["device_lost"] == 1
    assert merged["aten::masked_fill_.Tensor"]["bool,float32"]["calls"] == 2  # its calls on a lost device: not kept


def test_the_reader_gives_each_entry_its_evidence():
    from dmlprof.tables.measured import MeasuredTable

    section, old_samples, calls = _old_table_and_truth()
    table = MeasuredTable({"ops": section, "date": "2026-12-02"})
    assert table.evidence("aten::masked_fill_.Tensor", "bool,float32").generator == 1
    new = {key: {"outcome": "ok", "calls": calls, "divergent": [], "measured": MEASURED} for key in old_samples}
    merged, _ = merge.merge_section(section, old_samples, new, "2026-12-06")
    evidence = MeasuredTable({"ops": merged}).evidence("aten::masked_fill_.Tensor", "bool,float32")
    assert (evidence.generator, evidence.adapter, evidence.probed, evidence.remeasured) == (2, "fake adapter", 3, "whole")


def test_the_shipped_table_does_not_flag_the_recorders_masked_fill_artifact():
    """The first generator saw in-place masked_fill_ lose its write under dmlprof's recorder ("wrong 6/6");
    re-measured with the clean generator, its values are judged from a run nothing intercepted."""
    from dmlprof.tables.measured import load_measured

    table = load_measured("dml")
    for op, dtypes in (("aten::masked_fill_.Tensor", "bool,float32"), ("aten::masked_fill_.Scalar", "bool,float32")):
        assert table.wrong_results(op, dtypes) is None, (op, dtypes)
        assert table.evidence(op, dtypes).generator == 2
