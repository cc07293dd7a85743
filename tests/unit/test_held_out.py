"""The held-out measurement's own logic (tools/realdml/held_out.py), without a device.

GIVEN the keys a truth table used (the first few sample numbers of each op and dtype) and judged samples
WHEN  the held-out candidates are listed and the disagreements gathered
THEN  candidates are the later numbers of the same ops and dtypes, never a used key, none of another op;
      a path that says "runs" where real DirectML ended the process is listed as such; agreements are not
      listed; disagreements are grouped by op, dtype and where real DirectML ended the sample.
Cheap (no device, no OpInfo samples built).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "realdml"


def _held_out():
    sys.path.insert(0, str(TOOLS))
    spec = importlib.util.spec_from_file_location("held_out", TOOLS / "held_out.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_candidates_are_later_numbers_of_the_used_ops_and_dtypes():
    held_out = _held_out()
    import truth_samples

    first_float32 = truth_samples.SAMPLES_PER_OP["float32"]
    first_int64 = truth_samples.SAMPLES_PER_OP["int64"]
    used = {f"add|float32|{n}" for n in range(first_float32)} | {f"add|int64|{n}" for n in range(first_int64)}
    used |= {f"add|int64|{first_int64 + 1}", "probe.interpolate.nearest_x2|float32|0"}
    found = held_out.candidates(used, later=2)
    assert found == [f"add|float32|{first_float32}", f"add|float32|{first_float32 + 1}", f"add|int64|{first_int64}"]
    assert not set(found) & used


def test_disagreements_list_runs_where_real_ends_the_process():
    held_out = _held_out()
    samples = {
        "flip|float16|3": {"real": "aborts", "real_failed_op": "aten::flip", "real_message": "",
                           "predicted": "runs", "emulated": "aborts", "predicted_agrees": False,
                           "emulated_agrees": True, "predicted_differs": "runs, where real DirectML aborts"},
        "flip|float16|4": {"real": "aborts", "real_failed_op": "aten::flip", "real_message": "",
                           "predicted": "runs", "emulated": "runs", "predicted_agrees": False,
                           "emulated_agrees": False},
        "add|float32|5": {"real": "runs (device)", "real_failed_op": None, "real_message": "",
                          "predicted": "runs", "emulated": "runs", "predicted_agrees": True, "emulated_agrees": True},
    }
    found = held_out.disagreements({"samples": samples}, list(samples), describe=lambda key: "T[3]")
    assert [row["key"] for row in found["disagreements"]] == ["flip|float16|3", "flip|float16|4"]
    assert found["disagreements"][0]["ends_the_process_where_said_runs"] == ["predicted"]
    assert found["disagreements"][1]["ends_the_process_where_said_runs"] == ["predicted", "emulated"]
    (name, group), = found["by_class"].items()
    assert "flip | float16 | real aborts at aten::flip" == name
    assert (len(group["samples"]), group["predicted"], group["emulated"]) == (2, 2, 1)


def test_real_verdict_tells_fallback_from_device():
    held_out = _held_out()
    assert held_out.real_verdict({"outcome": "ok", "calls": [["aten::add.Tensor", "device", "", "float32"]]}) == \
        "runs (device)"
    assert held_out.real_verdict({"outcome": "ok", "calls": [["aten::kthvalue", "fallback", "", "int64"]]}) == \
        "runs (fallback)"
    assert held_out.real_verdict({"outcome": "aborts"}) == "aborts"


def test_keys_asked_by_name_are_judged_once_each_and_keys_that_are_not_held_out_are_refused(monkeypatch):
    held_out = _held_out()
    monkeypatch.setattr(held_out, "exists", lambda key: not key.endswith("|9"))
    held = ["half|float32|4", "to|float16|5", "half|float32|9"]
    asked, refused = held_out.given_keys(" half|float32|4,to|float16|5,half|float32|4,", held)
    assert (asked, refused) == (["half|float32|4", "to|float16|5"], [])
    asked, refused = held_out.given_keys("half|float32|0,half|float32|9,to|float16|5", held)
    assert refused == ["half|float32|0", "half|float32|9"]  # one the table used, one OpInfo does not make


def test_exclude_reads_the_keys_an_earlier_result_or_journal_judged(tmp_path):
    held_out = _held_out()
    result, journal = tmp_path / "seed33.json", tmp_path / "seed33.jsonl"
    result.write_text('{"samples": {"flip|float32|3": {}, "sum|int64|4": {}}}', encoding="utf-8")
    journal.write_text('{"key": "cat|bool|5", "result": {}}\n\n{"key": "flip|float32|3", "result": {}}\n',
                       encoding="utf-8")
    assert held_out.judged_keys(result) == {"flip|float32|3", "sum|int64|4"}
    assert held_out.judged_keys(journal) == {"cat|bool|5", "flip|float32|3"}
