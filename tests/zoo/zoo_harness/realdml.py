"""The calls of a session as the real-DirectML zoo run keeps them (tools/realdml/run_zoo.py writes them,
tests/zoo/test_zoo.py compares the prediction with them): device calls per step, counted by
``op|verdict|fallback ops``. The prediction's tensors accumulate gradients as torch-directml's do (out of
place: neither has storage); the emulated device's, which a script's ``--target dml`` runs on, accumulate
in place, so its sessions name that accumulation as torch-directml does (dmlprof.testing.as_on_directml)."""
from __future__ import annotations

from collections import Counter


def device_calls(session: dict) -> dict:
    """{step: {"op|verdict|fallback": calls}} of the calls that touched the device."""
    from dmlprof.testing import as_on_directml

    ops = session.get("ops") or {}
    emulated = (session.get("meta") or {}).get("backend") == "emulated-dml"
    names = ops.get("op", [])
    steps: dict = {}
    for step, op, verdict, fallback, phase in zip(ops.get("step", []), names, ops.get("verdict", []),
                                                  ops.get("fallback_ops", []), ops.get("phase") or [""] * len(names)):
        if verdict == "cpu":
            continue
        name = as_on_directml(op, phase) if emulated else op
        steps.setdefault(str(step), Counter())[f"{name}|{verdict}|{fallback or ''}"] += 1
    return {step: dict(sorted(calls.items())) for step, calls in sorted(steps.items())}
