"""Held-out OpInfo samples: the prediction and the emulated device judged against real torch-directml.

    . ~/.cache/realdml/env.sh
    PYTHONPATH=$PWD nice -n 5 ~/.cache/dmlprof/venv-torch2.4.1/bin/python tools/realdml/held_out.py \
        --count 300 --seed 32 --out benchmarks/results/held_out_opinfo-realdml.json

The shipped truth table (tests/opinfo/realdml_truth.json.gz, folded into dmlprof/tables/data/*.measured.json)
used each op's first few OpInfo samples per dtype (truth_samples.SAMPLES_PER_OP). The held-out samples are the
later sample numbers of the same ops and dtypes (``label|dtype|number`` with number >= that count, up to
``--later`` more): float32 ones run forward and backward, the others forward, as the table's did. None of them
is a key the table or its float64 pass measured.

Three verdicts per sample:
- real: each sample on real torch-directml through truth_supervisor.py / truth_worker.py (a fresh worker after
  any abort or device loss, a sample that ended its worker re-run alone; values judged against the CPU);
- predicted and emulated: the same samples (rebuilt from their keys, the same random incoming gradients)
  under ``dmlprof scan --target dml`` and ``--device emulated-dml`` of tests/opinfo/truth_replay.py, each
  judged against the real verdict by tests/opinfo/test_realdml_truth.py's ``judge`` (the same outcome; for a
  sample that ran, the same device calls: op, verdict, fallback ops). ``strict`` counts every difference;
  ``with_known`` forgives the differences that test's KNOWN tables name with a cause.

``--all`` judges every held-out sample instead of a seeded subset (hours on a CPU Vulkan driver); ``--keys K1,K2``
judges the named ones only (a class of misses again, after a change: benchmarks/results/held_out_channels_last-realdml.json);
``--exclude R`` (repeatable) leaves out the samples an earlier result or journal judged, so a fresh seed is judged on
samples no earlier round saw (benchmarks/results/held_out_opinfo-realdml-seed34.json). ``--journal``
keeps each real result as it is decided; ``--resume`` reuses a journal's results (a stopped run goes on).
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "opinfo"))

TRUTH = REPO / "tests" / "opinfo" / "realdml_truth.json.gz"
#: real outcomes a path is judged against (as in test_realdml_truth.py); the others are listed, not judged
JUDGED = ("ok", "raises", "aborts")
#: the realdml stack's variables: the paths' scans run without them, as CI's replay of the table does
REALDML_VARIABLES = ("VK_ICD_FILENAMES", "VKD3D_REALDML_NO_TILED", "VKD3D_REALDML_FORCE_FP64")


def used_keys() -> set:
    """Every sample key the shipped table was measured from (its truth, float64 pass, and per-op sample lists)."""
    from dmlprof.tables import DATA_DIR
    from dmlprof.tables.measured import SHIPPED

    with gzip.open(TRUTH, "rt", encoding="utf-8") as handle:
        truth = json.load(handle)
    used = set(truth["samples"]) | set(truth.get("float64_samples") or {})
    table = json.loads((Path(DATA_DIR) / SHIPPED["dml"]).read_text(encoding="utf-8"))
    for section in ("ops", "float64_adapter_ops"):
        for per_dtype in (table.get(section) or {}).values():
            for entry in per_dtype.values():
                if isinstance(entry, dict):
                    used.update(entry.get("samples") or ())
    return used


def candidates(used: set, later: int) -> list:
    """``label|dtype|number`` for the numbers after the table's, of every (op, dtype) the table measured."""
    import truth_samples

    pairs = sorted({tuple(key.split("|")[:2]) for key in used if not key.startswith("probe.") and key.count("|") == 2})
    return [f"{label}|{dtype}|{number}" for label, dtype in pairs if dtype in truth_samples.SAMPLES_PER_OP
            for number in range(truth_samples.SAMPLES_PER_OP[dtype], truth_samples.SAMPLES_PER_OP[dtype] + later)
            if f"{label}|{dtype}|{number}" not in used]


def exists(key: str) -> bool:
    """Whether OpInfo makes this sample on this torch, strided (as truth_samples.keys keeps them)."""
    import truth_samples

    label, dtype, number = key.split("|")
    if label not in truth_samples.ops():
        return False
    made = truth_samples._samples(truth_samples.ops()[label], label, dtype, int(number) + 1)
    return len(made) > int(number) and truth_samples._strided(made[int(number)])


def choose(keys: list, count: int, seed: int) -> list:
    """``count`` existing keys in a seeded random order (all existing keys when count is 0)."""
    order = list(keys)
    random.Random(seed).shuffle(order)
    chosen = []
    for key in order:
        if exists(key):
            chosen.append(key)
            if count and len(chosen) >= count:
                break
    return chosen


def given_keys(text: str, held_out: list) -> tuple:
    """(the keys asked for, in order and once each; those that are not held-out samples or do not exist)."""
    asked = list(dict.fromkeys(key.strip() for key in text.split(",") if key.strip()))
    allowed = set(held_out)
    return asked, [key for key in asked if key not in allowed or not exists(key)]


def judged_keys(path: Path) -> set:
    """The sample keys of an earlier held-out result (its "samples") or journal (a "key" a line)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return {json.loads(line)["key"] for line in text.splitlines() if line.strip()}
    return set(json.loads(text).get("samples") or {})


def measure_real(keys: list, journal, resume: bool) -> tuple:
    """(results by key, adapter): each key on real torch-directml, through the truth supervisor."""
    import measure_truth

    done: dict = {}
    if resume and journal and journal.is_file():
        for line in journal.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                done[record["key"]] = record["result"]
    todo = [key for key in keys if key not in done]
    results = measure_truth.measure(todo, {measure_truth.FORCE_FP64_ENV: "0"}, journal=journal) if todo else {}
    results = {**{key: done[key] for key in keys if key in done}, **results}
    adapter = next((r.get("measured", {}).get("adapter") for r in results.values() if r.get("measured", {}).get("adapter")), "")
    return results, adapter, len(keys) - len(todo)


def scan_paths(keys: list) -> dict:
    """{"predicted"|"emulated": (status by module, rows by module)} of the replay of ``keys``."""
    import test_realdml_truth

    saved = {name: os.environ.pop(name) for name in REALDML_VARIABLES if name in os.environ}
    try:
        with tempfile.TemporaryDirectory(prefix="held_out-") as work:
            work = Path(work)
            keys_file = work / "keys.txt"
            keys_file.write_text("\n".join(f"{key} random" for key in keys), encoding="utf-8")
            return {where: test_realdml_truth._scan(where, keys_file, work) for where in ("predicted", "emulated")}
    finally:
        os.environ.update(saved)


def real_verdict(real: dict) -> str:
    outcome = real.get("outcome", "")
    if outcome == "ok":
        fell = any(call[1] == "fallback" for call in real.get("calls", []))
        return "runs (fallback)" if fell else "runs (device)"
    return outcome


def path_verdict(status: str) -> str:
    from dmlprof.directml.failures import failure_in

    if status == "ok":
        return "runs"
    if status == "not run":
        return "not run"
    found = failure_in(RuntimeError(status.split(": ", 1)[-1]))
    return found.kind if found is not None else "raises (not as DirectML)"


def _strictly(judge, real: dict, status: str, rows: list) -> str:
    """The judge's verdict with none of test_realdml_truth's KNOWN differences forgiven."""
    import test_realdml_truth as t

    saved = (t.KNOWN, t.KNOWN_RAN, t.KNOWN_CALLS)
    t.KNOWN, t.KNOWN_RAN, t.KNOWN_CALLS = {}, {}, {}
    try:
        return judge(real, status, rows)
    finally:
        t.KNOWN, t.KNOWN_RAN, t.KNOWN_CALLS = saved


def summary(key: str) -> str:
    """The sample's arguments in a line: shapes and dtypes of tensors, scalars and flags as they are."""
    import torch
    import truth_samples
    from torch.utils._pytree import tree_map

    label, dtype, number = key.split("|")
    found = truth_samples._samples(truth_samples.ops()[label], label, dtype, int(number) + 1)[int(number)]

    def said(value):
        if isinstance(value, torch.Tensor):
            grad = ", grad" if value.requires_grad else ""
            layout = "" if value.is_contiguous() else ", strided"
            return f"T{list(value.shape)} {str(value.dtype).replace('torch.', '')}{grad}{layout}"
        return value

    text = repr((tree_map(said, found.input), tree_map(said, tuple(found.args)), tree_map(said, dict(found.kwargs))))
    return text.replace("'", "")[:300]


def judge_all(keys: list, real: dict, scans: dict) -> dict:
    import test_realdml_truth
    import truth_replay

    samples, totals = {}, {}
    for where in scans:
        totals[where] = Counter()
    for key in keys:
        outcome = real[key].get("outcome")
        entry = {"real": real_verdict(real[key]), "real_failed_op": real[key].get("failed_op"),
                 "real_message": (real[key].get("message") or "")[:200]}
        if real[key].get("clean_wrong"):
            entry["real_wrong_values"] = sorted(real[key]["clean_wrong"])
        for where, (statuses, rows) in scans.items():
            name = truth_replay.module_name(key)
            status, sample_rows = statuses.get(name, "not run"), rows.get(name, [])
            entry[where] = path_verdict(status)
            entry[f"{where}_message"] = status[:200] if status != "ok" else ""
            if outcome not in JUDGED:
                continue
            strict = _strictly(test_realdml_truth.judge, real[key], status, sample_rows)
            lenient = test_realdml_truth.judge(real[key], status, sample_rows)
            entry[f"{where}_agrees"] = not strict
            entry[f"{where}_agrees_with_known"] = not lenient
            if strict:
                entry[f"{where}_differs"] = strict[:300]
            totals[where].update({"judged": 1, "agree": int(not strict), "agree_with_known": int(not lenient)})
            dtype = key.split("|")[1]  # complex64 never exists on the device: its agreement is told apart
            totals[where].update({f"judged_{dtype}": 1, f"agree_{dtype}": int(not strict)})
            if status == "ok" and outcome in ("aborts",):
                totals[where]["runs_where_real_ends_the_process"] += 1
            elif status == "ok" and outcome == "raises":
                totals[where]["runs_where_real_raises"] += 1
            elif status != "ok" and outcome == "ok":
                totals[where]["fails_where_real_runs"] += 1
        samples[key] = entry
    return {"samples": samples, "totals": {where: dict(found) for where, found in totals.items()}}


def disagreements(judged: dict, keys: list, describe=None) -> dict:
    """Every sample a path judged differently, with the op, dtype and its arguments (``describe(key)``, by
    default :func:`summary`); grouped by op, dtype and how and where real DirectML ended it."""
    describe = describe or summary
    found, by_class = [], defaultdict(lambda: {"samples": [], "predicted": 0, "emulated": 0})
    for key in keys:
        entry = judged["samples"][key]
        wrong = [where for where in ("predicted", "emulated") if entry.get(f"{where}_agrees") is False]
        if not wrong:
            continue
        label, dtype, _ = key.split("|")
        row = {"key": key, "op": label, "dtype": dtype, "arguments": describe(key), "real": entry["real"],
               "real_failed_op": entry["real_failed_op"], "real_message": entry["real_message"],
               **{where: entry[where] for where in ("predicted", "emulated")},
               **{f"{where}_differs": entry.get(f"{where}_differs", "") for where in wrong}}
        row["ends_the_process_where_said_runs"] = [where for where in wrong
                                                   if entry["real"] == "aborts" and entry[where] == "runs"]
        found.append(row)
        group = by_class[f"{label} | {dtype} | real {entry['real']} at {entry['real_failed_op']}"]
        group["samples"].append(key)
        for where in wrong:
            group[where] += 1
    return {"disagreements": found, "by_class": dict(sorted(by_class.items(), key=lambda item: -len(item[1]["samples"])))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=300, help="held-out samples to judge (a seeded random subset)")
    parser.add_argument("--all", action="store_true", help="every held-out sample (hours)")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--later", type=int, default=5, help="sample numbers after the table's, per op and dtype")
    parser.add_argument("--journal", type=Path, help="each real result appended here as decided (JSON lines)")
    parser.add_argument("--resume", action="store_true", help="reuse the --journal's results")
    parser.add_argument("--real-only", action="store_true", help="measure on real DirectML, judge no path (rates)")
    parser.add_argument("--exclude", type=Path, action="append", default=[],
                        help="skip the samples judged in this earlier result (.json) or journal (.jsonl); repeatable")
    parser.add_argument("--keys", help="judge these held-out samples only (label|dtype|number, comma-separated): "
                                       "a class's samples again, after a change")
    args = parser.parse_args()
    if args.count < 0 or args.later < 1:
        print("error: --count must be >= 0 and --later >= 1", file=sys.stderr)
        return 2
    if not TRUTH.is_file():
        print(f"error: no truth table at {TRUTH}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(1)  # before the supervisor forks workers (measure_truth.py says why)
    started = time.time()
    used = used_keys()
    held_out = candidates(used, args.later)
    if args.keys:
        keys, refused = given_keys(args.keys, held_out)
        if refused:
            print(f"error: not held-out samples of this table (--later {args.later}): {', '.join(refused)}",
                  file=sys.stderr)
            return 2
    else:
        try:
            seen = set().union(*(judged_keys(path) for path in args.exclude))
        except (OSError, ValueError) as error:
            print(f"error: cannot read --exclude: {error}", file=sys.stderr)
            return 2
        keys = choose([key for key in held_out if key not in seen], 0 if args.all else args.count, args.seed)
    print(f"{len(keys)} held-out samples ({len(used)} keys used by the table)", flush=True)
    chosen_at = time.time()
    real, adapter, resumed = measure_real(keys, args.journal, args.resume)
    real_seconds = time.time() - chosen_at
    print(f"real: {len(real)} samples in {real_seconds:.0f} s", flush=True)
    document = {"about": "held-out OpInfo samples (later sample numbers of the table's ops and dtypes): the "
                         "prediction (--target dml) and the emulated device against real torch-directml "
                         "(tools/realdml/held_out.py)",
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "seed": args.seed, "count_asked": len(keys) if args.keys else (0 if args.all else args.count),
                "keys_asked": keys if args.keys else None, "later": args.later,
                "excluded_from": [path.name for path in args.exclude],
                "sample_count": len(keys), "adapter": adapter, "choose_seconds": round(chosen_at - started),
                "real_seconds": round(real_seconds), "real_resumed_from_journal": resumed,
                # the rate counts the samples measured in this run only (a resumed one took no time here)
                "real_seconds_per_sample": round(real_seconds / max(1, len(keys) - resumed), 2),
                "real_outcomes": dict(Counter(real_verdict(r) for r in real.values()))}
    import measure_truth

    document["versions"] = measure_truth.versions()
    if not args.real_only:
        scans = scan_paths(keys)
        judged = judge_all(keys, real, scans)
        for where, found in judged["totals"].items():
            found["agreement_percent"] = round(100 * found.get("agree", 0) / max(1, found.get("judged", 0)), 2)
            found["agreement_with_known_percent"] = round(
                100 * found.get("agree_with_known", 0) / max(1, found.get("judged", 0)), 2)
        document["totals"] = judged["totals"]
        found = disagreements(judged, keys)
        document["says_runs_real_ends_the_process"] = [row for row in found["disagreements"]
                                                       if row["ends_the_process_where_said_runs"]]
        # wrong values are not part of the verdicts above (a path that runs agrees): listed for the next measure
        document["real_wrong_values"] = {key: sorted(real[key]["clean_wrong"]) for key in keys
                                         if real[key].get("clean_wrong")}
        document["not_judged"] = {key: real[key].get("outcome") for key in keys if real[key].get("outcome") not in JUDGED}
        document.update(found)
        document["samples"] = judged["samples"]
    else:
        document["samples"] = {key: {"real": real_verdict(real[key])} for key in keys}
    document["seconds"] = round(time.time() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True), encoding="utf-8")
    print(json.dumps({"totals": document.get("totals"), "real_outcomes": document["real_outcomes"],
                      "seconds": document["seconds"]}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
