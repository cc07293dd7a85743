"""Turn a measurement (measure_truth.py's output) into the data dmlprof ships and tests with.

    python tools/realdml/ship_truth.py MEASURED.json

writes
- ``dmlprof/tables/data/torch_directml-<version>.measured.json``: per op overload and dtype, how its
  calls went on real DirectML (device, fallback, raises, aborts, results that differ from the CPU's
  and by how much), with the versions and the date: what every scan reads (dmlprof/tables/measured.py);
- ``tests/opinfo/realdml_truth.json.gz``: every sample's outcome and calls, which CI replays on the
  prediction and the emulated device (tests/opinfo/test_realdml_truth.py).
"""
from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[2]
FORMAT = "dmlprof-measured-table"


def _entry() -> dict:
    return {"calls": 0, "device": 0, "fallback": 0, "raises": 0, "aborts": 0, "wrong": 0,
            "max_abs_error": None, "max_rel_error": None, "messages": [], "samples": []}


def _evidence(entry: dict, result: dict, key: str) -> None:
    """How an entry's samples were measured (generator 2 on): kept in ``entry["measured"]`` as counts, so a
    reader (and tests/unit/test_truth_supervisor.py) can see each was followed by a passing health probe."""
    how = result.get("measured")
    if not how:
        return
    seen = entry.setdefault("_seen", set())
    if key in seen:
        return
    seen.add(key)
    measured = entry.setdefault("measured", {"generator": how.get("generator"), "adapter": how.get("adapter", ""),
                                             "samples": 0, "probed": 0, "ended_process": 0, "after_device_loss": 0,
                                             "values": "judged from a run nothing intercepted (random incoming "
                                                       "gradients); verdicts from a separate recorded run"})
    if result.get("outcome") in ("aborts", "hangs", "device_lost"):
        measured["ended_process"] += result.get("outcome") != "device_lost"
        return
    measured["samples"] += 1
    measured["probed"] += bool(how.get("probe_after"))
    from truth_table_health import device_removed  # noqa: E402  (beside this file)

    measured["after_device_loss"] += device_removed(result.get("message") or "")


def _note_sample(entry: dict, key: str) -> None:
    if len(entry["samples"]) < 5 and key not in entry["samples"]:
        entry["samples"].append(key)


def _signature(dtypes: str, sample_dtype: str) -> str:
    """A call's dtypes as the op frame names them (its tensors' dtypes, sorted, comma-joined): the key its
    outcome is kept under, so ``mul(float32, bool)`` and ``mul(float32, float32)`` are told apart; a call
    with no tensor (a factory that ended the process) takes its sample's dtype."""
    return dtypes or sample_dtype


def aggregate(samples: dict) -> dict:
    """Per op, per dtype signature: how its calls went, over every sample."""
    ops: dict = defaultdict(lambda: defaultdict(_entry))
    for key, result in samples.items():
        sample_dtype = key.split("|")[1]
        generator_2 = "measured" in result
        outcome = result.get("outcome")
        if outcome == "device_lost":  # its calls ran on a dying device: only the loss is kept, at its call
            if result.get("failed_op"):
                entry = ops[result["failed_op"]][_signature(result.get("failed_dtypes", ""), sample_dtype)]
                entry["device_lost"] = entry.get("device_lost", 0) + 1
                _note_sample(entry, key)
                _evidence(entry, result, key)
            continue
        for op, verdict, _fallback, dtypes in result.get("calls", []):
            if generator_2 and verdict not in ("device", "fallback"):
                continue  # a call on host tensors (the sample's own setup) is no verdict about the device
            entry = ops[op][_signature(dtypes, sample_dtype)]
            entry["calls"] += 1
            entry[verdict if verdict in ("device", "fallback") else "device"] += 1
            _evidence(entry, result, key)
        for wrong in result.get("divergent", []):
            entry = ops[wrong["op"]][_signature(wrong.get("dtypes", ""), sample_dtype)]
            entry["wrong"] += 1
            for field in ("max_abs_error", "max_rel_error"):
                value = wrong.get(field)
                if value is not None and (entry[field] is None or value > entry[field]):
                    entry[field] = value
            if wrong.get("reason") and wrong["reason"] not in entry["messages"] and len(entry["messages"]) < 3:
                entry["messages"].append(wrong["reason"][:200])
            _note_sample(entry, key)
        if outcome in ("raises", "aborts") and result.get("failed_op"):
            entry = ops[result["failed_op"]][_signature(result.get("failed_dtypes", ""), sample_dtype)]
            entry[outcome] += 1
            message = (result.get("message") or result.get("signal") or "").strip()[:300]
            if message and message not in entry["messages"] and len(entry["messages"]) < 3:
                entry["messages"].append(message)
            _note_sample(entry, key)
            _evidence(entry, result, key)
    for by_dtype in ops.values():
        for entry in by_dtype.values():
            entry.pop("_seen", None)
    return {op: dict(sorted(by_dtype.items())) for op, by_dtype in sorted(ops.items())}


def table_document(measured: dict) -> dict:
    versions = measured["versions"]
    return {
        "format": FORMAT, "format_version": 1,
        "package": "torch-directml", "package_version": versions["torch_directml"],
        "torch_version": versions["torch"].split("+")[0], "versions": versions, "date": measured["date"],
        "about": measured["about"], "adapter_profiles": measured["adapter_profiles"],
        "samples_measured": len(measured["samples"]), "seconds": measured["seconds"],
        "outcomes": _outcome_counts(measured["samples"]),
        "ops": aggregate(measured["samples"]),
        "float64_adapter_ops": aggregate(measured["float64_samples"]),
    }


def _outcome_counts(samples: dict) -> dict:
    counts: dict = defaultdict(int)
    for result in samples.values():
        counts[result.get("outcome", "?")] += 1
    return dict(sorted(counts.items()))


def truth_document(measured: dict) -> dict:
    """What CI replays: each sample's outcome, the call it stopped at, and its calls."""
    keep = ("outcome", "failed_op", "message", "signal", "calls", "incoming_gradients", "measured")
    return {"versions": measured["versions"], "date": measured["date"],
            "samples": {key: {k: v for k, v in result.items() if k in keep}
                        for key, result in measured["samples"].items()},
            "float64_samples": {key: {k: v for k, v in result.items() if k in keep}
                                for key, result in measured["float64_samples"].items()}}


def _one_op_per_line(table: dict) -> str:
    """The table as JSON a diff can read: its facts indented, then one line per op."""
    head = {k: v for k, v in table.items() if k not in ("ops", "float64_adapter_ops")}
    parts = [json.dumps(head, indent=1, sort_keys=True)[:-2]]
    for key in ("ops", "float64_adapter_ops"):
        rows = ",\n".join(f" {json.dumps(op)}: {json.dumps(v, sort_keys=True)}" for op, v in table[key].items())
        parts.append(f',\n"{key}": {{\n{rows}\n}}')
    return "".join(parts) + "\n}\n"


def main(path: str) -> int:
    measured = json.loads(Path(path).read_text(encoding="utf-8"))
    table = table_document(measured)
    out = REPO / "dmlprof" / "tables" / "data" / f"torch_directml-{table['package_version']}.measured.json"
    out.write_text(_one_op_per_line(table), encoding="utf-8")
    truth = REPO / "tests" / "opinfo" / "realdml_truth.json.gz"
    with gzip.open(truth, "wt", encoding="utf-8") as handle:
        json.dump(truth_document(measured), handle, sort_keys=True)
    print(f"wrote {out.relative_to(REPO)} ({out.stat().st_size // 1024} KiB) and {truth.relative_to(REPO)} "
          f"({truth.stat().st_size // 1024} KiB): {table['outcomes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
