"""The calls of a session as the real-DirectML zoo run keeps them (tools/realdml/run_zoo.py writes them,
tests/zoo/test_zoo.py compares the prediction with them): device calls per step, counted by
``op|verdict|fallback ops``. No renaming: the prediction's tensors accumulate gradients as torch-directml's
do (only the emulated device's differ: dmlprof.testing.ACCUMULATES_IN_PLACE)."""
from __future__ import annotations

from collections import Counter


def device_calls(session: dict) -> dict:
    """{step: {"op|verdict|fallback": calls}} of the calls that touched the device."""
    ops = session.get("ops") or {}
    steps: dict = {}
    for step, op, verdict, fallback in zip(ops.get("step", []), ops.get("op", []), ops.get("verdict", []),
                                           ops.get("fallback_ops", [])):
        if verdict == "cpu":
            continue
        steps.setdefault(str(step), Counter())[f"{op}|{verdict}|{fallback or ''}"] += 1
    return {step: dict(sorted(calls.items())) for step, calls in sorted(steps.items())}
