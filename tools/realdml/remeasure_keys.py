"""Which samples of the shipped truth table to re-measure with the clean generator, most wanted first.

    python tools/realdml/remeasure_keys.py KEYS.txt

1. every sample of the ops the first generator is known to have judged under dmlprof's recorder wrongly
   (``masked_fill_``'s lost write; the backward of maximum/minimum/max.binary, causal attention, the
   triplet margin losses) or with all-ones incoming gradients (``nll_loss``), and every sample with a call
   of an entry flagged wrong, so the entry is rebuilt whole (entries with more than ``WHOLE_LIMIT``
   samples: the samples it names);
2. every sample that raised or ended the process (the device may have been lost before it).
"""
from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "dmlprof" / "tables" / "data" / "torch_directml-0.2.5.dev240914.measured.json"
TRUTH = REPO / "tests" / "opinfo" / "realdml_truth.json.gz"
NAMED = ("masked_fill", "maximum", "minimum", "max.binary", "min.binary", "nn.functional.scaled_dot_product_attention",
         "nn.functional.triplet_margin_loss", "nn.functional.triplet_margin_with_distance_loss",
         "nn.functional.nll_loss", "nn.functional.cross_entropy", "nn.functional.layer_norm")
WHOLE_LIMIT = 160


def contributors(samples: dict) -> dict:
    """(op, dtypes) -> the sample keys with a call of it (the table's entries, rebuilt from the truth)."""
    found: dict = defaultdict(set)
    for key, result in samples.items():
        sample_dtype = key.split("|")[1]
        for op, _verdict, _fallback, dtypes in result.get("calls", []):
            found[(op, dtypes or sample_dtype)].add(key)
    return found


def wanted(table: dict, samples: dict) -> list:
    by_entry = contributors(samples)
    first: list = [key for key in samples if key.split("|")[0] in NAMED]
    for op, by_dtype in table["ops"].items():
        for dtypes, entry in by_dtype.items():
            if entry.get("wrong") or op.startswith("aten::masked_fill"):
                whole = by_entry.get((op, dtypes), set())
                first += sorted(whole) if len(whole) <= WHOLE_LIMIT else list(entry.get("samples") or [])
    second = [key for key, result in samples.items() if result.get("outcome") in ("raises", "aborts")]
    return [key for key in dict.fromkeys(first + second) if key in samples]


def main(out: str) -> int:
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    with gzip.open(TRUTH, "rt", encoding="utf-8") as handle:
        samples = json.load(handle)["samples"]
    keys = wanted(table, samples)
    Path(out).write_text("\n".join(keys) + "\n", encoding="utf-8")
    print(f"{len(keys)} samples to re-measure -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else "usage: remeasure_keys.py KEYS.txt")
