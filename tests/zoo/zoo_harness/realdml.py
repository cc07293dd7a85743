"""The calls of a session as the real-DirectML zoo run keeps them (tools/realdml/run_zoo.py writes them,
tests/zoo/test_zoo.py compares the prediction with them): device calls per step, counted by
``op|verdict|fallback ops``. No renaming: the prediction's tensors accumulate gradients as torch-directml's
do (out of place where the autograd engine adds two gradients of one tensor: neither has storage of its own).
The emulated device's tensors do, and add in place there: :func:`gradient_adds_merged` compares such a
session with real DirectML, on both sides alike."""
from __future__ import annotations

from collections import Counter


def device_calls(session: dict) -> dict:
    """{step: {"op|verdict|fallback": calls}} of the calls that touched the device."""
    ops = session.get("ops") or {}
    steps: dict = {}
    for step, op, verdict, fallback in zip(ops.get("step", []), ops.get("op", []), ops.get("verdict", []),
                                           ops.get("fallback_ops", [])):
        if verdict in ("cpu", "host"):  # off the device (a format 1 file says cpu for the host's bookkeeping too)
            continue
        steps.setdefault(str(step), Counter())[f"{op}|{verdict}|{fallback or ''}"] += 1
    return {step: dict(sorted(calls.items())) for step, calls in sorted(steps.items())}


def gradient_adds_merged(calls: dict) -> dict:
    """``calls`` (as :func:`device_calls` counts them) with in-place and out-of-place tensor adds counted as one.

    The autograd engine adds two gradients of one tensor in place on the emulated device (its tensors have
    storage) and out of place on torch-directml, while ``.grad`` accumulation is in place on both; the
    stored real calls keep no phase, so the two are told apart on neither side."""
    from dmlprof.testing import ACCUMULATES_IN_PLACE

    merged: dict = {}
    for step, counts in calls.items():
        out = merged.setdefault(step, Counter())
        for key, count in counts.items():
            op, _, rest = key.partition("|")
            out[f"{ACCUMULATES_IN_PLACE.get(op, op)}|{rest}"] += count
    return {step: dict(sorted(counts.items())) for step, counts in merged.items()}
