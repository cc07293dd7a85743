"""Fold a re-measure (measure_truth.py --keys-file: its output, or its journals) into the shipped table.

    python tools/realdml/merge_truth.py MEASURED.json|JOURNAL.jsonl ...

Rebuilds every table entry the re-measured samples touch from per-sample records: the shipped truth
(tests/opinfo/realdml_truth.json.gz: each sample's calls, outcome and the op it failed at) for the samples
not re-measured, the new results for those re-measured. An entry all of whose samples were re-measured is
replaced whole (``measured.remeasured = "whole"``); one some of whose samples were is corrected
(``"part"``): its counts exactly, its wrong-result count by the re-measured samples where the shipped
entry names every sample it was wrong for, else the shipped count stays beside the new one
(``measured.wrong_kept_from_generator_1``). Entries no re-measured sample touches stay as shipped (no
``measured``: generator 1). Prints the counts: entries re-measured, verdicts changed, flags removed.
"""
from __future__ import annotations

import datetime
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ship_truth  # noqa: E402
from truth_supervisor import GENERATOR  # noqa: E402
from truth_table_health import device_removed  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "dmlprof" / "tables" / "data" / "torch_directml-0.2.5.dev240914.measured.json"
TRUTH = REPO / "tests" / "opinfo" / "realdml_truth.json.gz"
#: an entry names at most this many samples (ship_truth._note_sample)
NAMED_SAMPLES = 5


def read_results(paths: list) -> tuple:
    """(samples, float64 samples) from measure_truth outputs and journals (a journal named
    ``*.float64.jsonl`` holds the float64 adapter's pass)."""
    samples: dict = {}
    float64: dict = {}
    for path in map(Path, paths):
        if path.suffix == ".jsonl":
            target = float64 if path.name.endswith(".float64.jsonl") else samples
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    record = json.loads(line)
                    target[record["key"]] = record["result"]
        else:
            document = json.loads(path.read_text(encoding="utf-8"))
            samples.update(document.get("samples") or {})
            float64.update(document.get("float64_samples") or {})
    return samples, float64


def _old_contributions(key: str, result: dict, table_section: dict) -> Counter:
    """What one generator-1 sample added to each entry: Counter of ((op, dtypes), field)."""
    found: Counter = Counter()
    sample_dtype = key.split("|")[1]
    for op, verdict, _fallback, dtypes in result.get("calls", []):
        entry_key = (op, dtypes or sample_dtype)
        found[(entry_key, "calls")] += 1
        found[(entry_key, "fallback" if verdict == "fallback" else "device")] += 1
    outcome, failed = result.get("outcome"), result.get("failed_op")
    if outcome in ("raises", "aborts") and failed:
        dtypes = _failed_dtypes(key, outcome, table_section.get(failed) or {}, result.get("calls", []), failed)
        if dtypes is not None:
            found[((failed, dtypes), outcome)] += 1
    return found


def _failed_dtypes(key: str, outcome: str, by_dtype: dict, calls: list, failed: str):
    """The dtypes of the call a generator-1 sample failed at (the truth file does not keep them): the entry
    naming the sample, else the only one with such failures, else its last call of that op, else its dtype."""
    candidates = {d: e for d, e in by_dtype.items() if e.get(outcome)}
    for dtypes, entry in candidates.items():
        if key in (entry.get("samples") or ()):
            return dtypes
    if len(candidates) == 1:
        return next(iter(candidates))
    last = [dtypes for op, _v, _f, dtypes in calls if op == failed]
    if last and last[-1] in candidates:
        return last[-1]
    sample_dtype = key.split("|")[1]
    return sample_dtype if sample_dtype in candidates else None


def merge_section(table_section: dict, old_samples: dict, new_samples: dict, date: str) -> tuple:
    """(merged section, per-entry report)."""
    remeasured = set(new_samples)
    old_by_entry: dict = {}
    for key, result in old_samples.items():
        for (entry_key, field), count in _old_contributions(key, result, table_section).items():
            old_by_entry.setdefault(entry_key, {}).setdefault(key, Counter())[field] += count
    for op, by_dtype in table_section.items():  # samples named by an entry (wrong there) contribute too
        for dtypes, entry in by_dtype.items():
            for key in entry.get("samples") or ():
                old_by_entry.setdefault((op, dtypes), {}).setdefault(key, Counter())
    new_section = ship_truth.aggregate(new_samples)
    merged = {op: dict(by_dtype) for op, by_dtype in table_section.items()}
    report = {}
    touched = {(op, d) for op, by in new_section.items() for d in by} | {
        entry_key for entry_key, by_key in old_by_entry.items() if remeasured & set(by_key)}
    for op, dtypes in sorted(touched):
        old = (table_section.get(op) or {}).get(dtypes)
        new = (new_section.get(op) or {}).get(dtypes) or ship_truth._entry()
        contributors = set(old_by_entry.get((op, dtypes), {}))
        whole = old is None or contributors <= remeasured
        if whole:
            entry = dict(new)
        else:
            entry = _corrected(old, new, old_by_entry[(op, dtypes)], remeasured)
        if not entry.get("calls") and not any(entry.get(f) for f in ("raises", "aborts", "wrong", "device_lost")):
            merged.get(op, {}).pop(dtypes, None)  # no re-measured sample makes this call any more
            report[(op, dtypes)] = ("dropped", old, None)
            continue
        entry["measured"] = {**new.get("measured", {}), "remeasured": "whole" if whole else "part", "date": date,
                             **({"wrong_kept_from_generator_1": entry.pop("_wrong_kept")} if "_wrong_kept" in entry
                                else {})}
        entry.pop("_wrong_kept", None)
        merged.setdefault(op, {})[dtypes] = entry
        report[(op, dtypes)] = ("whole" if whole else "part", old, entry)
    return {op: dict(sorted(by.items())) for op, by in sorted(merged.items()) if by}, report


def _corrected(old: dict, new: dict, old_by_key: dict, remeasured: set) -> dict:
    """A shipped entry with its re-measured samples' old contributions replaced by their new ones."""
    entry = {k: (list(v) if isinstance(v, list) else v) for k, v in old.items()}
    for key, contribution in old_by_key.items():
        if key in remeasured:
            for field, count in contribution.items():
                entry[field] = max(0, entry.get(field, 0) - count)
    for field in ("calls", "device", "fallback", "raises", "aborts", "device_lost"):
        entry[field] = entry.get(field, 0) + new.get(field, 0)
    named = list(old.get("samples") or ())
    wrong_named = [k for k in named if not any(old_by_key.get(k, {}).get(f) for f in ("raises", "aborts"))]
    all_named = len(named) < NAMED_SAMPLES
    if old.get("wrong") and not (all_named and set(wrong_named) <= remeasured):
        kept = max(0, old["wrong"] - len(set(wrong_named) & remeasured))
        entry["wrong"], entry["_wrong_kept"] = kept + new.get("wrong", 0), kept
    else:
        entry["wrong"] = new.get("wrong", 0)
        if not new.get("wrong"):
            entry["max_abs_error"] = entry["max_rel_error"] = None
    if new.get("wrong"):
        for field in ("max_abs_error", "max_rel_error"):
            values = [v for v in (entry.get(field) if entry.get("_wrong_kept") else None, new.get(field)) if v is not None]
            entry[field] = max(values) if values else None
    entry["messages"] = list(dict.fromkeys([m for m in new.get("messages", []) if not device_removed(m)]
                                           + [m for m in old.get("messages", []) if entry.get("_wrong_kept")
                                              or "differ" not in m]))[:3]
    entry["samples"] = list(dict.fromkeys(new.get("samples", []) + [k for k in named if k not in remeasured]))[:NAMED_SAMPLES]
    return entry


def _flagged(entry) -> bool:
    from dmlprof.tables.measured import MeasuredTable

    if not entry:
        return False
    return MeasuredTable({"ops": {"aten::x": {"d": entry}}}).wrong_results("aten::x", "d") is not None


def _verdict(entry) -> str:
    if not entry:
        return "none"
    parts = [f for f in ("device_lost", "aborts", "raises") if entry.get(f)]
    return (parts[0] if parts else "runs") + (" wrong" if _flagged(entry) else "")


def main(paths: list) -> int:
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    with gzip.open(TRUTH, "rt", encoding="utf-8") as handle:
        truth = json.load(handle)
    new_samples, new_float64 = read_results(paths)
    date = datetime.date.today().isoformat()
    table["ops"], report = merge_section(table["ops"], truth["samples"], new_samples, date)
    table["float64_adapter_ops"], report64 = merge_section(table["float64_adapter_ops"], truth["float64_samples"],
                                                           new_float64, date)
    keep = ("outcome", "failed_op", "message", "signal", "calls", "incoming_gradients", "measured")
    for section, new in (("samples", new_samples), ("float64_samples", new_float64)):
        for key, result in new.items():
            truth[section][key] = {k: v for k, v in result.items() if k in keep}
    table["outcomes"] = ship_truth._outcome_counts(truth["samples"])
    changed = {k: (_verdict(old), _verdict(new)) for k, (_, old, new) in report.items() if _verdict(old) != _verdict(new)}
    flags_removed = sorted(f"{op} ({d})" for (op, d), (was, now) in changed.items() if was.endswith(" wrong")
                           and not now.endswith(" wrong"))
    flags_added = sorted(f"{op} ({d})" for (op, d), (was, now) in changed.items() if now.endswith(" wrong")
                         and not was.endswith(" wrong"))
    table["format_version"] = 2
    table["remeasured"] = {
        "date": date, "generator": GENERATOR, "samples": len(new_samples), "float64_samples": len(new_float64),
        "how": "tools/realdml/measure_truth.py --keys-file (remeasure_keys.py's choice), merged by merge_truth.py: "
               "values judged from a run nothing intercepted, random incoming gradients, a device health probe after "
               "each device run, samples that ended a worker or the device re-run alone",
        "entries_whole": sum(1 for kind, _, _ in report.values() if kind == "whole"),
        "entries_part": sum(1 for kind, _, _ in report.values() if kind == "part"),
        "entries_dropped": sum(1 for kind, _, _ in report.values() if kind == "dropped"),
        "verdicts_changed": len(changed), "wrong_flags_removed": flags_removed, "wrong_flags_added": flags_added,
        "sample_outcomes": dict(Counter(r.get("outcome") for r in new_samples.values())),
        "samples_wrong_unattributed": sorted(k for k, r in new_samples.items() if r.get("wrong_unattributed")),
    }
    TABLE.write_text(ship_truth._one_op_per_line(table), encoding="utf-8")
    with gzip.open(TRUTH, "wt", encoding="utf-8") as handle:
        json.dump(truth, handle, sort_keys=True)
    summary = {k: v for k, v in table["remeasured"].items() if k not in ("how",)}
    print(json.dumps(summary, indent=1))
    for (op, d), (was, now) in sorted(changed.items()):
        print(f"  {op} ({d}): {was} -> {now}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else "usage: merge_truth.py MEASURED.json|JOURNAL.jsonl ...")
