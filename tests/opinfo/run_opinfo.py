"""The live side of the OpInfo cross-check, in one process (see test_opinfo.py).

    python run_opinfo.py --out RESULT.json --session SESSION.json   (shard and samples from the environment)

1. bare: each sample on the emulated DirectML device without dmlprof, the
   device's own fallback counters read per sample (the oracle);
2. live: ``dmlprof.scan(opinfo_samples.py, "emulated-dml")``, one step; the
   session is saved and the per-sample status the model wrote is kept.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL_FILE = HERE / "opinfo_samples.py"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def bare_pass(testing) -> dict:
    spec = importlib.util.spec_from_file_location("opinfo_samples_bare", MODEL_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.build_model().to(testing.device())
    results = {}
    for key, sample in model.samples.items():
        testing.reset_fallback_counts()
        try:
            sample()
            results[key] = {"status": "ok", "fallbacks": testing.fallback_counts()}
        except Exception as exc:
            results[key] = {"status": _describe(exc), "fallbacks": testing.fallback_counts()}
    return {"samples": results, "labels": model.labels, "left_out": model.left_out}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--session", required=True)
    args = parser.parse_args()
    import torch

    import dmlprof
    from dmlprof import testing

    testing.load()
    result = {"torch": torch.__version__, "bare": bare_pass(testing), "live_error": None}
    status_path = Path(args.out).with_suffix(".live-status.json")
    os.environ["DMLPROF_OPINFO_STATUS"] = str(status_path)
    try:
        session = dmlprof.scan(MODEL_FILE, "emulated-dml", warmup=0, steps=1, profiler=False)
    except Exception as exc:
        result["live_error"] = _describe(exc)
        session = getattr(exc, "session", None)
    if session is not None:
        session.save(args.session)
    result["live"] = json.loads(status_path.read_text(encoding="utf-8")) if status_path.is_file() else None
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
