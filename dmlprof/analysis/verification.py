"""What the reports show of a verification: plain data from ``extras['verify']`` (no printing, no torch).

``extras['verify']`` is what :class:`dmlprof.verify.Verifier` recorded (docs/verify.md);
this groups it per op and per parameter, as every report shows it.
"""
from __future__ import annotations

from typing import Optional

from dmlprof.units import fmt_count


def _group_divergent(records: list) -> list:
    groups: dict = {}
    for r in records:
        key = (r.get("op", ""), r.get("module", ""), r.get("source", ""), r.get("what", ""))
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "op": key[0], "module": key[1], "source": key[2], "what": key[3], "calls": 0,
                "reason": r.get("reason", ""), "max_abs_error": None, "max_rel_error": None,
                "phase": r.get("phase", ""), "first_step": r.get("step"),
                "input_shapes": r.get("input_shapes", []), "input_dtypes": r.get("input_dtypes", []),
                "output_shape": r.get("output_shape", []), "output_dtype": r.get("output_dtype", ""),
                "mismatched": r.get("mismatched", 0), "numel": r.get("numel", 0),
                "rtol": r.get("rtol"), "atol": r.get("atol"),
            }
        g["calls"] += 1
        for field in ("max_abs_error", "max_rel_error"):
            value = r.get(field)
            if value is not None and (g[field] is None or value > g[field]):
                g[field] = value
    return sorted(groups.values(), key=lambda g: (-(g["max_rel_error"] or 0.0), -g["calls"], g["op"]))


def _group_lost(records: list) -> list:
    groups: dict = {}
    for r in records:
        g = groups.setdefault(r.get("parameter", ""), {
            "parameter": r.get("parameter", ""), "optimizer": r.get("optimizer", ""), "steps": 0,
            "shape": r.get("shape", []), "dtype": r.get("dtype", ""), "max_abs_grad": 0.0, "lr": r.get("lr"),
        })
        g["steps"] += 1
        g["max_abs_grad"] = max(g["max_abs_grad"], r.get("max_abs_grad") or 0.0)
    return list(groups.values())


#: devices whose kernels are the CPU's: a comparison with the CPU there shows dmlprof's own plumbing, never the
#: real device's numerics
CPU_KERNEL_BACKENDS = ("emulated-dml",)


def verdict_line(verify: dict) -> str:
    """One sentence: nothing diverged, or how much did."""
    checked = int(verify.get("checked_calls", 0))
    ops = int(verify.get("checked_ops", 0))
    divergent = int(verify.get("divergent_calls", 0))
    lost = len(verify.get("lost_updates", []))
    steps = int(verify.get("optimizer_steps", 0))
    params = int(verify.get("parameters_checked", 0))
    updates = (f"{fmt_count(params, 'parameter update')} over {fmt_count(steps, 'optimizer step')} "
               f"{'landed' if params == 1 else 'all landed'}" if steps
               else "no optimizer step completed, so no parameter update was checked")
    if divergent == 0 and lost == 0:
        if checked == 0:
            return f"Verification: no device op call was checked; {updates}."
        if verify.get("backend") in CPU_KERNEL_BACKENDS:
            return (f"Verification: nothing diverged - all {checked} checked device op calls ({ops} distinct ops) "
                    "matched the CPU, as they must here: the emulated device computes with the CPU's own kernels, "
                    "so it cannot see DirectML's wrong values (run --verify on real DirectML for those; ops "
                    "measured wrong on it are flagged where the model calls them); "
                    f"{updates}.")
        return (f"Verification: nothing diverged - all {checked} checked device op calls ({ops} distinct ops) "
                f"matched the CPU; {updates}.")
    parts = []
    if divergent:
        parts.append(f"{divergent} of {checked} checked device op calls diverged from the CPU")
    else:
        parts.append(f"all {checked} checked device op calls matched the CPU")
    if lost:
        names = sorted({r.get("parameter", "") for r in verify.get("lost_updates", [])})
        parts.append(f"{len(names)} parameters did not change although their gradient was non-zero (lost updates)")
    return "Verification: " + "; ".join(parts) + "."


def summary(verify: Optional[dict]) -> Optional[dict]:
    """Report-ready view of ``extras['verify']`` (``None`` when the scan did not verify)."""
    if not isinstance(verify, dict):
        return None
    divergent = _group_divergent(verify.get("divergent", []))
    lost = _group_lost(verify.get("lost_updates", []))
    skipped = [
        {"reason": entry.get("reason", key), "calls": int(entry.get("calls", 0)),
         "ops": sorted(entry.get("ops", {}), key=lambda op: -entry["ops"][op])}
        for key, entry in sorted((verify.get("skipped") or {}).items(), key=lambda kv: -kv[1].get("calls", 0))
    ]
    notes = []
    if verify.get("partial"):
        notes.append("the scan stopped early: only the calls that ran were checked")
    if verify.get("divergent_records_capped"):
        notes.append(f"only the first {len(verify.get('divergent', []))} divergent calls are listed in detail")
    if verify.get("device_type") == "cpu":
        notes.append("the device is the CPU: the check compares the CPU with itself")
    if verify.get("parameters_not_expected_to_move"):
        notes.append(f"{verify['parameters_not_expected_to_move']} unchanged parameters were not flagged: "
                     "lr x gradient was below their rounding step")
    return {
        "clean": not divergent and not lost,
        "headline": verdict_line(verify),
        "checked_calls": int(verify.get("checked_calls", 0)),
        "checked_ops": int(verify.get("checked_ops", 0)),
        "divergent_calls": int(verify.get("divergent_calls", 0)),
        "divergent_ops": divergent,
        "lost_updates": lost,
        "optimizer_steps": int(verify.get("optimizer_steps", 0)),
        "parameters_checked": int(verify.get("parameters_checked", 0)),
        "skipped_calls": int(verify.get("skipped_calls", 0)),
        "skipped": skipped,
        "tolerances": verify.get("tolerances", {}),
        "notes": notes,
    }
