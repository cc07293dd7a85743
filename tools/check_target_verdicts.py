"""Hold every XPU/MPS verdict of a step against the wheel it claims to be read from.

    PYTHONPATH=. python tools/check_target_verdicts.py --site-packages ~/.cache/dmlprof/venv-torch2.14.1/lib/python3.11/site-packages \\
        models/*.py tests/zoo/models/*.py --out benchmarks/results/target_verdicts.json

For each model file and target, the step is predicted twice (the fallback variable unset, then set to 1 so the
step runs to its end and every op it calls is seen). Each call the prediction recorded on the device, and each op
it sent to the CPU, is then judged again from the wheel's own files, re-read here (not the committed table, so a
stale table shows): native_functions.yaml (the op, or the op the target's device calls in its place, has a
kernel of the target's or a composite one), the always-on fallback list the table names, and for MPS
common_mps.py's dtype gaps and the held dtypes. A call judged otherwise is a disagreement, written with its
reason; the unit test ``tests/unit/test_target_verdicts.py`` holds the committed result.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from target_tables import MPS_FAILURE_LISTS, classify, opinfo_aten_names, read_common_mps, read_yaml  # noqa: E402

#: kinds under which a call stays on the device (a composite's pieces are calls of their own, judged too)
ON_DEVICE = ("native", "composite_explicit", "composite_implicit")


def wheel_kinds(site: Path, semantics) -> dict:
    entries = read_yaml(site / "torchgen" / "packaged" / "ATen" / "native" / "native_functions.yaml")
    kinds = classify(entries, semantics.table.dispatch_key)
    for op in semantics.table.doc.get("registered_outside_yaml", {}):
        kinds[op] = "native"  # C++ registrations the table read from their sources (named in the table)
    return kinds


def dtype_gaps(site: Path) -> dict:
    """common_mps.py's failing dtypes per aten base name, re-read from the wheel (None: every dtype)."""
    common = read_common_mps(site / "torch" / "testing" / "_internal" / "common_mps.py")
    gaps: dict = {}
    for opinfo, dtypes in (common.get(MPS_FAILURE_LISTS[0]) or {}).items():  # the list the semantics apply
        for base in opinfo_aten_names(opinfo):
            gaps[base] = dtypes
    return gaps


def judge_dtypes(op: str, dtypes: list, gaps: dict) -> list:
    base = op.split("::", 1)[-1].split(".", 1)[0].rstrip("_")
    if base not in gaps:
        return []
    listed = gaps[base]
    hit = [d for d in dtypes if listed is None or d in listed]
    return [(op, "runs on the device", f"common_mps.py lists {base} failing for {hit[0]}",
             "a dtype gap the semantics did not apply")] if hit else []


def judge_failure(failure, session, kinds: dict, semantics, gaps: dict) -> list:
    """A predicted failure agrees with the wheel where the op has no kernel of the target's (and is not on the
    always-on list), or a dtype of the call is one the target cannot hold or common_mps.py lists as failing."""
    last = session.ops.iloc[-1] if len(session.ops) else None
    dtypes = [d for d in str(last["dtypes"]).split(",") if d] if last is not None else []
    unsupported = semantics.table.dtypes.get("unsupported", ())
    if any(d in unsupported for d in dtypes) or "float64" in failure.message.lower():
        return []  # a dtype the device holds no tensor of
    if judge_dtypes(failure.op, dtypes, gaps):
        return []  # a dtype gap of common_mps.py
    named = [op for op in kinds if f"'{op}'" in failure.message or failure.message.startswith(op + " ")]
    if named and all(kinds[op] not in ON_DEVICE and op not in semantics.table.cpu_fallback for op in named):
        return []
    return [(failure.op, "raises", "the wheel's files give no reason to", failure.message[:160])]


def judge_row(op: str, verdict: str, fallback_ops: list, kinds: dict, semantics) -> list:
    """Disagreements of one recorded call with the wheel: ``[(op, predicted, wheel says, reason)]``."""
    found = []
    theirs = semantics.counterparts.get(op, op)
    if verdict == "device":
        kind = kinds.get(theirs)
        if kind not in ON_DEVICE and theirs not in semantics.table.cpu_fallback:
            found.append((op, "runs on the device", f"yaml kind {kind}",
                          "the running torch serves it with a composite kernel (or a kernel of its own) that the "
                          "wheel's yaml does not have" if kind is not None else "not in this wheel's yaml"))
    for inner in fallback_ops:
        kind = kinds.get(semantics.counterparts.get(inner, inner))
        if kind in ON_DEVICE:
            found.append((inner, "falls back", f"yaml kind {kind}",
                          "the wheel registers it, but the running torch's dispatcher reached the fallback"))
    return found


def predict(path: str, target: str, enabled: bool, torch_version=None):
    from dmlprof.predict import predict_scan
    from dmlprof.runner import ScanStopped

    variable = f"PYTORCH_ENABLE_{target.upper()}_FALLBACK"
    os.environ[variable] = "1" if enabled else "0"
    try:
        return predict_scan(path, target=target, target_torch=torch_version)
    except ScanStopped as stopped:
        return stopped.session
    finally:
        os.environ.pop(variable, None)


def check_model(path: str, target: str, kinds: dict, semantics, gaps: dict) -> dict:
    from dmlprof.schema import parse_fallback_ops

    version = semantics.table.torch_version
    plain = predict(path, target, enabled=False, torch_version=version)
    enabled = predict(path, target, enabled=True, torch_version=version)
    ops = enabled.ops
    if enabled.meta.device_failure is not None and len(ops):
        ops = ops.iloc[:-1]  # the call the step stopped at: predicted to raise, judged below as a failure
    rows, disagreements = {}, []
    for row in ops.itertuples():
        inner = parse_fallback_ops(row.fallback_ops) if row.fallback_ops else []
        if row.verdict not in ("device", "fallback"):
            continue
        rows.setdefault(row.op, set()).add(row.verdict)
        disagreements += judge_row(row.op, row.verdict, list(inner), kinds, semantics)
        if row.verdict == "device" and gaps:
            disagreements += judge_dtypes(row.op, [d for d in str(row.dtypes).split(",") if d], gaps)
    failure = plain.meta.device_failure
    enabled_failure = enabled.meta.device_failure
    for stopped in (failure, enabled_failure):
        if stopped is not None:
            disagreements += judge_failure(stopped, plain if stopped is failure else enabled, kinds, semantics, gaps)
    import torch

    return {
        "running_torch": torch.__version__,  # whose dispatcher decided the composites (docs/targets.md)
        "ops_on_device": sorted(op for op, seen in rows.items() if "device" in seen),
        "ops_falling_back": sorted({op for text in ops["fallback_ops"] if text for op in parse_fallback_ops(text)}),
        "fails_without_fallback": None if failure is None else {"op": failure.op, "message": failure.message},
        "fails_with_fallback": None if enabled_failure is None else {"op": enabled_failure.op,
                                                                     "message": enabled_failure.message},
        "disagreements": sorted({tuple(d) for d in disagreements}),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--site-packages", required=True, type=Path)
    parser.add_argument("--targets", default="xpu,mps")
    parser.add_argument("--torch-version", help="the tables' torch (default: the newest shipped)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--merge", action="store_true",
                        help="add to --out's models (another interpreter judged the entries it could import)")
    args = parser.parse_args(argv)
    from dmlprof.targets import semantics_for

    result = {"format": "dmlprof-target-verdicts", "format_version": 1, "models": {}}
    if args.merge and args.out.exists():
        result = json.loads(args.out.read_text(encoding="utf-8"))
    for target in args.targets.split(","):
        semantics = semantics_for(target, args.torch_version, environ={})
        kinds = wheel_kinds(args.site_packages, semantics)
        gaps = dtype_gaps(args.site_packages) if semantics.table.dtypes else {}
        result.setdefault("tables", {})[target] = semantics.table.version_label()
        for path in args.models:
            try:
                checked = check_model(path, target, kinds, semantics, gaps)
            except Exception as exc:  # a model whose packages are missing: said, not hidden
                checked = {"skipped": f"{type(exc).__name__}: {str(exc)[:200]}"}
            result["models"].setdefault(path, {})[target] = checked
            print(f"{path} {target}: {checked.get('skipped') or len(checked['disagreements'])} "
                  f"{'' if 'skipped' in checked else 'disagreements'}", file=sys.stderr, flush=True)
    args.out.write_text(json.dumps(result, indent=1, default=list) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
