"""Pure comparisons between runs of one zoo entry; each returns the differences as readable lines.

Inputs are the JSON results of :mod:`zoo_harness.run_entry` and dmlprof
session files (read as plain JSON, so a change in dmlprof's Python classes
cannot hide a difference). An empty list means "the same".
"""
from __future__ import annotations

import difflib
import json
from collections import Counter
from pathlib import Path

#: Differences between the profiler traces with and without dmlprof that are the act of recording
#: itself, not a change in what the program ran. Each is general; nothing here names a model.
EXPLANATIONS = {
    "mode_range": "a TorchDispatchMode's own profiler range (torch >= 2.5 wraps each call a mode handles in it)",
    "redispatch": "the recorder calls the op again below itself, so the profiler sees one call as two nested events",
    "dmlprof_range": "an annotation range dmlprof itself opens",
    "worker_batch": ("a DataLoader rebuilding a batch its worker processes sent: workers deliver out of order "
                     "as their timing decides, so which step receives a batch varies from run to run"),
}
#: The profiler's range around a DataLoader iterator's ``__next__`` (``enumerate(DataLoader)#..._Iter.__next__``).
DATALOADER_NEXT = "DataLoaderIter.__next__"
#: Shown when unexplained differences remain and the scan used a dispatch mode.
MODE_HINT = ("hint: while any TorchDispatchMode is active ATen's isTensorSubclassLike() is true for every tensor, "
             "so composites take their subclass branches (ctc_loss -> _ctc_loss.Tensor, prod's backward via "
             "cumprod, BCE-with-logits and cummax/cummin backward, SDPA math add_ -> add)")
MAX_LINES = 40


# -- loss and fallbacks ----------------------------------------------------------------------------
def loss_differences(bare: dict, scanned: dict) -> list:
    """Every loss of the step window, bit for bit."""
    expected = sum(bare["window"])
    a, b = bare["losses"][:expected], scanned["losses"][:expected]
    lines = []
    if len(a) != len(b):
        lines.append(f"{len(a)} losses without dmlprof, {len(b)} with it (backward calls in the step window)")
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            lines.append(f"loss {index}: {x!r} without dmlprof, {y!r} with it (difference {y - x:.3e})")
    return lines


def count_differences(expected: dict, actual: dict, expected_label: str, actual_label: str) -> list:
    """Per op: calls in one count and the other, for every op where they differ."""
    expected, actual = Counter(expected or {}), Counter(actual or {})
    lines = []
    for op in sorted(set(expected) | set(actual)):
        if expected[op] != actual[op]:
            lines.append(f"{op}: {expected[op]} calls {expected_label}, {actual[op]} {actual_label}")
    return lines


# -- sessions ----------------------------------------------------------------------------------------
def load_session(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


#: verdicts of calls that never touched the device: calls on CPU tensors, and the host's bookkeeping
_OFF_DEVICE = ("cpu", "host")


def session_rows(session: dict, device_only: bool = False, as_on_directml: bool = False) -> list:
    """One ``(op, verdict, fallback ops)`` per recorded call, in order.

    ``device_only`` keeps the calls that touched the device (verdicts ``device`` and ``fallback``):
    calls on CPU tensors include host work whose timing is not the program's to decide (a
    DataLoader unpickles its workers' batches whenever they arrive, early ones ahead of time).
    ``as_on_directml`` names autograd's gradient accumulation as torch-directml calls it (the
    emulated device accumulates in place where it does not: ``dmlprof.testing.ACCUMULATES_IN_PLACE``).
    """
    from dmlprof.testing import as_on_directml as directml_name

    ops = session.get("ops") or {}
    names = ops.get("op") or []
    verdicts = ops.get("verdict") or [""] * len(names)
    fallbacks = ops.get("fallback_ops") or [""] * len(names)
    phases = ops.get("phase") or [""] * len(names)
    return [(directml_name(op, phase) if as_on_directml else op, verdict, _parse_fallbacks(text))
            for op, verdict, text, phase in zip(names, verdicts, fallbacks, phases)
            if not device_only or verdict not in _OFF_DEVICE]


def session_steps(session: dict, device_only: bool = False) -> list:
    """Each recorded call's step (``device_only``: of the calls :func:`session_rows` keeps with it)."""
    ops = session.get("ops") or {}
    steps = list(ops.get("step") or [])
    if not device_only:
        return steps
    verdicts = ops.get("verdict") or [""] * len(steps)
    return [step for step, verdict in zip(steps, verdicts) if verdict not in _OFF_DEVICE]


def _parse_fallbacks(text) -> tuple:
    found: Counter = Counter()
    for part in filter(None, (text or "").split(";")):
        name, _, count = part.rpartition("=")
        found[name] += int(count)
    return tuple(sorted(found.items()))


def reported_fallbacks(session: dict) -> dict:
    """Calls per op the session says reached the CPU fallback (inner ops of composites included)."""
    total: Counter = Counter()
    for _, verdict, fallbacks in session_rows(session):
        if verdict == "fallback":
            total.update(dict(fallbacks))
    return dict(total)


# -- op sequences (torch.profiler) ----------------------------------------------------------------------
def trace_differences(bare: dict, scanned: dict) -> tuple:
    """``(unexplained, explained)`` lines comparing the profiler's calls per optimizer-step window.

    Calls are compared as counts per window rather than as one ordered list:
    threads (autograd's device thread, a DataLoader's pin-memory thread)
    interleave differently from run to run.
    """
    unexplained, explained = [], Counter()
    windows = max(len(bare["windows"]), len(scanned["windows"]))
    if len(bare["windows"]) != len(scanned["windows"]):
        unexplained.append(f"{len(bare['windows'])} optimizer steps without dmlprof, {len(scanned['windows'])} with it")
    for index in range(min(len(bare["windows"]), len(scanned["windows"]))):
        missing, extra, why = window_difference(bare["windows"][index], scanned["windows"][index])
        explained.update(why)
        for op, count in sorted(extra.items()):
            unexplained.append(f"step window {index}: {op} x{count} only with dmlprof")
        for op, count in sorted(missing.items()):
            unexplained.append(f"step window {index}: {op} x{count} only without dmlprof")
    explained_lines = [f"{count} x {op}: {EXPLANATIONS[reason]}" for (reason, op), count in sorted(explained.items())]
    if unexplained and _used_mode(scanned, windows):
        unexplained.append(MODE_HINT)
    return unexplained, explained_lines


def window_difference(bare_events: list, scanned_events: list) -> tuple:
    """``(missing, extra, explained)`` Counters for one window; see :data:`EXPLANATIONS`."""
    bare_counts = Counter(name for name, _ in bare_events)
    scanned_counts = Counter(name for name, _ in scanned_events)
    explained: Counter = Counter()
    for name in [n for n in scanned_counts if n == "PythonDispatchMode" or n.startswith("dmlprof")]:
        explained[("mode_range" if name == "PythonDispatchMode" else "dmlprof_range", name)] += scanned_counts.pop(name)
    for name, count in _worker_batch_calls(scanned_events).items():
        surplus = min(count, scanned_counts[name] - bare_counts[name])
        if surplus > 0:
            scanned_counts[name] -= surplus
            explained[("worker_batch", name)] += surplus
    for name, count in _worker_batch_calls(bare_events).items():
        shortfall = min(count, bare_counts[name] - scanned_counts[name])
        if shortfall > 0:
            bare_counts[name] -= shortfall
            explained[("worker_batch", name)] += shortfall
    nested_bare, nested_scanned = _self_nested(bare_events), _self_nested(scanned_events)
    for name, count in nested_scanned.items():
        surplus = min(count - nested_bare.get(name, 0), scanned_counts[name] - bare_counts[name])
        if surplus > 0:
            scanned_counts[name] -= surplus
            explained[("redispatch", name)] += surplus
    return bare_counts - scanned_counts, scanned_counts - bare_counts, explained


def _worker_batch_calls(events) -> Counter:
    """Calls made directly inside a DataLoader iterator's ``__next__`` (rebuilding received batches)."""
    return Counter(name for name, parent in events if DATALOADER_NEXT in parent)


def _self_nested(events) -> Counter:
    """Calls nested in a call of the same op: directly, through a dispatch mode's range, or through the
    autograd range torch.library gives a custom op (``GeneratedBackwardFor_torchvision_roi_align_default``)."""
    return Counter(name for name, parent in events
                   if parent in (name, f"<mode>/{name}") or parent.startswith(_autograd_range(name)))


def _autograd_range(name: str) -> str:
    return "GeneratedBackwardFor_" + name.replace("::", "_").replace(".", "_") + "_"


def _used_mode(scanned: dict, windows: int) -> bool:
    return any(name == "PythonDispatchMode" or parent.startswith("<mode>/")
               for window in scanned["windows"][:windows] for name, parent in window)


def program_counts(run: dict, first_window: int) -> Counter:
    """Profiler calls per op name from ``first_window`` on, the tail included."""
    counts: Counter = Counter()
    for window in run["windows"][first_window:] + [run["tail"]]:
        counts.update(name for name, _ in window)
    return counts


def reported_op_differences(session: dict, bare: dict) -> list:
    """Ops the session reports more often than the unrecorded program calls them in the measured steps.

    Calls on the device only: host calls include a DataLoader rebuilding its workers' batches, which
    arrive in whichever step their timing decides (see :func:`session_rows`).
    """
    program = program_counts(bare, bare["window"][0])
    reported = Counter(op.split(".", 1)[0] for op, _, _ in session_rows(session, device_only=True))
    lines = []
    for op, count in sorted(reported.items()):
        if count > program[op]:
            lines.append(f"{op}: reported {count} times, the program without dmlprof calls it {program[op]} times")
    return lines


# -- prediction against emulation ---------------------------------------------------------------------
def row_differences(emulated: list, predicted: list, context: int = 2, emulated_only=frozenset()) -> list:
    """Call-for-call differences of two row lists, as diff hunks.

    ``emulated_only``: ops whose calls on the device may be missing from the prediction, and
    nothing else (calls that exist only for some counts of a data-dependent size, which a
    prediction without values cannot know); when every difference is such a call, there is none.
    A missing fallback is never forgiven.
    """
    if emulated == predicted:
        return []
    matcher = difflib.SequenceMatcher(a=emulated, b=predicted, autojunk=False)
    changes = [change for change in matcher.get_opcodes() if change[0] != "equal"]
    if emulated_only and all(tag == "delete" and all(row[0] in emulated_only and row[1] == "device" for row in emulated[a1:a2])
                             for tag, a1, a2, _, _ in changes):
        return []
    lines = [f"emulated {len(emulated)} calls, predicted {len(predicted)}; "
             f"{sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != 'equal')} differ"]
    for group in matcher.get_grouped_opcodes(context):
        lines.append("@@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines.extend(f"  [{a1 + k}] {_row(r)}" for k, r in enumerate(emulated[a1:a2]))
                continue
            lines.extend(f"- [{a1 + k}] {_row(r)}" for k, r in enumerate(emulated[a1:a2]))
            lines.extend(f"+ [{b1 + k}] {_row(r)}" for k, r in enumerate(predicted[b1:b2]))
        if len(lines) > MAX_LINES:
            lines.append("... (more differences)")
            break
    return lines


#: Session facts that must agree before calls can (printed with a call-for-call difference).
STEP_META = ("warmup_steps", "steps", "partial")


def meta_differences(emulated: dict, predicted: dict) -> str:
    """`` (predicted warmup_steps None, emulated 1)``-style notes on the step windows, or ``""``."""
    notes = [f"predicted {key} {predicted['meta'].get(key)!r}, emulated {emulated['meta'].get(key)!r}"
             for key in STEP_META if predicted["meta"].get(key) != emulated["meta"].get(key)]
    return f" ({'; '.join(notes)})" if notes else ""


def _row(row) -> str:
    op, verdict, fallbacks = row
    inner = ",".join(f"{name}={count}" for name, count in fallbacks)
    return f"{op} {verdict}" + (f" [{inner}]" if inner else "")


def shorten(lines: list, limit: int = MAX_LINES) -> str:
    if len(lines) <= limit:
        return "\n".join(lines)
    return "\n".join(lines[:limit] + [f"... and {len(lines) - limit} more"])
