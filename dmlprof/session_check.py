"""What a session file must hold before anything reads it (``Session.from_dict`` calls this).

Sessions are files people send each other, so a loaded file is untrusted
input. Every field the reports, the analyses and the trace read is checked
here against the type they expect; a file that fails gets one
:class:`~dmlprof.errors.SessionFileError` naming the field, never a traceback
from deep inside a renderer. Fields dmlprof does not read are left alone
(newer writers may add some).

A schema is a small callable ``check(value, where)`` that raises ``_Bad``;
``record``, ``list_of`` and friends build them.
"""
from __future__ import annotations

import re
from typing import Callable, Dict

from dmlprof.errors import SessionFileError

INT64_MAX = 2**63 - 1
#: deeper nesting than this is no session's (and would exhaust the stack of any recursive reader)
MAX_DEPTH = 64
#: a session holds at most this many op rows (a very long script records a few million)
MAX_ROWS = 50_000_000
#: a string in a session holds at most this many characters (Session.save clips longer ones, so every session
#: dmlprof writes loads again): one 100 MB module name must not become a 400 MB page
MAX_TEXT_CHARS = 65_536
#: an op, module or source name holds at most this many (a path's longest, PATH_MAX): the module tree has a
#: row per parent of each name, and the page one per row, so a long dotted name costs its length squared
MAX_NAME_CHARS = 4_096
#: the op frame's columns that hold names (at most MAX_NAME_CHARS each)
NAME_COLUMNS = ("op", "module", "source")
#: the longest time a session may hold, in milliseconds (about 31 years): 1e308 passes as finite, and sums
#: of such times are not
MAX_DURATION_MS = 1e12
#: the most ranks a distributed session may claim: far above any job dmlprof merges, low enough that a
#: forged world size cannot exhaust memory where the ranks are listed
MAX_WORLD_SIZE = 1 << 20


class _Bad(Exception):
    """One field is wrong; ``str()`` says where and how."""


Check = Callable[[object, str], None]


def _type_name(value) -> str:
    return "null" if value is None else {dict: "an object", list: "a list", str: "a string", bool: "true/false",
                                         int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _expect(ok: bool, value, where: str, what: str) -> None:
    if not ok:
        raise _Bad(f"{where} should be {what}, not {_type_name(value)}")


def text(value, where: str) -> None:
    _expect(isinstance(value, str), value, where, "a string")
    if len(value) > MAX_TEXT_CHARS:
        raise _Bad(f"{where} is {len(value):,} characters long, more than the {MAX_TEXT_CHARS:,} a session holds")


def boolean(value, where: str) -> None:
    _expect(isinstance(value, bool), value, where, "true or false")


def integer(value, where: str) -> None:
    _expect(isinstance(value, int) and not isinstance(value, bool), value, where, "an integer")
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise _Bad(f"{where} is out of range ({str(value)[:20]}...)")


def count(value, where: str) -> None:
    integer(value, where)
    if value < 0:
        raise _Bad(f"{where} should not be negative")


def below(limit: int) -> Check:
    """A count under ``limit``."""
    def run(value, where):
        count(value, where)
        if value >= limit:
            raise _Bad(f"{where} is {value:,}, past the most dmlprof reads ({limit - 1:,})")
    return run


def number(value, where: str) -> None:
    # json.loads with parse_constant rejects NaN/Infinity; a huge literal like 1e400 still reads as inf
    _expect(isinstance(value, (int, float)) and not isinstance(value, bool), value, where, "a number")
    if isinstance(value, float) and not abs(value) < float("inf"):
        raise _Bad(f"{where} is not a finite number")
    if isinstance(value, int):
        integer(value, where)


def name(value, where: str) -> None:
    text(value, where)
    if len(value) > MAX_NAME_CHARS:
        raise _Bad(f"{where} is {len(value):,} characters long, more than the {MAX_NAME_CHARS:,} a name holds")


def duration_ms(value, where: str) -> None:
    """A time in milliseconds: from 0 to :data:`MAX_DURATION_MS`."""
    number(value, where)
    if not 0 <= value <= MAX_DURATION_MS:
        raise _Bad(f"{where} is {value:g} ms, not a time from 0 to {MAX_DURATION_MS:g} ms")


def duration_s(value, where: str) -> None:
    duration_ms(value * 1000 if isinstance(value, (int, float)) and not isinstance(value, bool) else value, where)


def anything(value, where: str) -> None:
    pass


def optional(check: Check) -> Check:
    def run(value, where):
        if value is not None:
            check(value, where)
    return run


def list_of(check: Check) -> Check:
    def run(value, where):
        _expect(isinstance(value, list), value, where, "a list")
        for i, item in enumerate(value):
            check(item, f"{where}[{i}]")
    return run


def dict_of(check: Check) -> Check:
    def run(value, where):
        _expect(isinstance(value, dict), value, where, "an object")
        for key, item in value.items():
            check(item, f"{where}.{key}")
    return run


def record(fields: Dict[str, Check]) -> Check:
    """An object whose listed fields, where present, pass their checks (other fields are not read)."""
    def run(value, where):
        _expect(isinstance(value, dict), value, where, "an object")
        for key, check in fields.items():
            if key in value:
                check(value[key], f"{where}.{key}")
    return run


def requiring(keys, check: Check) -> Check:
    """``check``, and ``keys`` must be present (fields a reader indexes directly)."""
    def run(value, where):
        check(value, where)
        missing = [k for k in keys if k not in value]
        if missing:
            raise _Bad(f"{where} lacks {', '.join(missing)}")
    return run


_shape = list_of(integer)
_scalar = optional(lambda v, w: _expect(isinstance(v, (str, int, float, bool)), v, w, "a string or number"))

#: a session's ``meta`` as format 2 holds it (dmlprof.meta.RunMeta.to_file; format 1 is upgraded before the check)
META = record({
    **{key: text for key in ("kind", "run_mode", "model", "model_name", "started_at", "partial_reason", "optimizer",
                             "loss_fn")},
    "partial": boolean,
    **{key: optional(count) for key in ("batch_size", "steps", "warmup_steps", "steps_requested", "parameters",
                                        "replacements_applied")},
    "duration_s": optional(duration_s),
    "step_times_ms": list_of(duration_ms),
    "recorded_step_times_ms": optional(list_of(duration_ms)),
    "notes": list_of(text),
    "script_args": list_of(text),
    "warnings": list_of(record({"category": text, "message": text, "count": count})),
    "memory": record({"peak_bytes": optional(count), "total_bytes": optional(count),
                      "allocated_bytes": optional(count), "source": optional(text)}),
    "module_classes": dict_of(text),
    "environment": record({key: text for key in ("dmlprof_version", "torch_version", "python_version", "platform")}),
    "device": record({"backend": text, "device": text, "name": text, "versions": dict_of(_scalar)}),
    "recording": record({
        "timing": text, "description": text, "structure_step_ms": optional(duration_ms),
        **{key: boolean for key in ("sync", "profiler", "verify")},
        "profiler_check": record({"matched_ops": count, "time_ms": number, "profiler_time_ms": number,
                                  "ratio": optional(number), "note": text})}),
    "nonfinite_loss": record({"step": count, "steps_run": count, "value": text}),
    "prediction": record({"table_version": text, "target": text}),
    "sweep": record({
        "stop_reason": text, "memory_budget": text, "memory_total_bytes": optional(count), "notes": list_of(text),
        "settings": record({"steps": optional(count), "warmup_steps": optional(count), "amp": optional(text)}),
        "details": list_of(record({"fallback_ops": list_of(text), "fallback_recorded": boolean,
                                   "step_times_ms": list_of(duration_ms)}))}),
    "distributed": record({"rank": below(MAX_WORLD_SIZE), "local_rank": below(MAX_WORLD_SIZE),
                           "world_size": optional(below(MAX_WORLD_SIZE + 1)), "local_world_size": below(MAX_WORLD_SIZE + 1),
                           "node_rank": below(MAX_WORLD_SIZE), "backend": optional(text), "run_id": text,
                           "collective_calls": count, "comm_timing": text}),
})

_DIVERGENT = record({
    **{key: text for key in ("op", "module", "source", "what", "reason", "phase", "output_dtype")},
    "step": optional(integer), "mismatched": count, "numel": count,
    **{key: optional(number) for key in ("rtol", "atol", "max_abs_error", "max_rel_error")},
    "input_shapes": list_of(_shape), "input_dtypes": list_of(text), "output_shape": _shape,
})
_LOST = record({"parameter": text, "optimizer": text, "shape": _shape, "dtype": text,
                "max_abs_grad": optional(number), "lr": optional(number)})
VERIFY = record({
    **{key: count for key in ("checked_calls", "checked_ops", "divergent_calls", "skipped_calls", "optimizer_steps",
                              "parameters_checked", "parameters_not_expected_to_move")},
    "device_type": text, "backend": text, "divergent_records_capped": boolean, "partial": boolean,
    "divergent": list_of(_DIVERGENT),
    "lost_updates": list_of(_LOST),
    "skipped": dict_of(record({"reason": text, "calls": count, "ops": dict_of(count)})),
    "tolerances": dict_of(record({"rtol": optional(number), "atol": optional(number)})),
})

_SWEEP_ROW = requiring(("batch_size", "status"), record({
    "batch_size": count, "status": text, "samples_per_s": optional(number), "step_ms_p50": optional(number),
    "step_ms_p95": optional(number), "peak_memory_bytes": optional(count), "memory_source": optional(text),
    "fallback_time_share": optional(number), "error": optional(text),
}))
SWEEP = record({"rows": list_of(_SWEEP_ROW), "recommended_batch_size": optional(count),
                "knee_batch_size": optional(count), "memory_budget_bytes": optional(number)})

_HEADLINE = requiring(
    ("fallback_calls", "fallback_calls_per_step", "fallback_time_share", "fallback_bytes_moved_per_step",
     "step_time_ms"),
    record({"fallback_calls": count, "fallback_calls_per_step": number, "fallback_time_share": number,
            "fallback_bytes_moved_per_step": number, "step_time_ms": optional(number), "steps": count,
            "error": optional(text), "fallback_ops": dict_of(count), "inner_fallback_calls": count,
            "inner_ops": dict_of(list_of(text))}))
REPLACE = requiring(("before", "after", "removed_ops", "remaining_ops"), record({
    "before": _HEADLINE, "after": _HEADLINE, "step_time_speedup": optional(number), "removed_ops": list_of(text),
    "remaining_ops": list_of(requiring(("op", "calls", "replacement"), record(
        {"op": text, "calls": count, "replacement": optional(text)}))),
    "applied": list_of(anything),
}))
_COLLECTIVES = {**{c: optional(integer) for c in ("seq", "step", "start_ns", "comm_start_ns", "thread")},
                **{c: optional(count) for c in ("bytes", "call_time_ns", "comm_time_ns")},
                **{c: optional(text) for c in ("op", "collective", "comm_source", "module", "source")}}


def _collectives(value, where: str) -> None:
    _columns(value, where, _COLLECTIVES)


EXTRAS = record({"verify": VERIFY, "sweep": SWEEP, "replace": REPLACE, "collectives": _collectives})

# The op frame: integer, text and nullable-number columns (dmlprof.record.frame.OP_COLUMNS).
_OP_INT = ("seq", "step", "fallback_calls", "start_ns", "time_ns", "bytes_moved", "thread")
_OP_TEXT = ("phase", "op", "verdict", "evidence", "fallback_ops", "module", "source", "input_devices",
            "output_devices", "dtypes", "shapes", "transfer", "ranges", "arguments")
_FALLBACK_OPS = re.compile(r"(?:[^;]+=\d{1,18})(?:;[^;]+=\d{1,18})*")
_PROFILER_OPS = {"op": text, "calls": count, "time_ns": number, "device_time_ns": optional(number)}


def _columns(value, where: str, checks: Dict[str, Check]) -> None:
    """A frame as ``{column: [values]}``: every column a list, all of one length, known columns typed."""
    if value is None:
        return
    _expect(isinstance(value, dict), value, where, "an object of columns")
    lengths = set()
    for column, values in value.items():
        _expect(isinstance(values, list), values, f"{where}.{column}", "a list")
        lengths.add(len(values))
    if len(lengths) > 1:
        raise _Bad(f"{where}: its columns have different lengths ({', '.join(map(str, sorted(lengths)[:4]))})")
    if lengths and max(lengths) > MAX_ROWS:
        raise _Bad(f"{where} has more than {MAX_ROWS:,} rows")
    for column, check in checks.items():
        for i, item in enumerate(value.get(column) or ()):
            check(item, f"{where}.{column}[{i}]")


def _fallback_ops(value, where: str) -> None:
    text(value, where)
    if value and not _FALLBACK_OPS.fullmatch(value):
        raise _Bad(f"{where} should read 'aten::op=count;...'")


def _json_text(value, where: str) -> None:
    """A column of JSON text (shapes, ranges): text whose brackets nest no deeper than any session's do, so
    no reader's ``json.loads`` meets a RecursionError (counted first: most cells hold a few brackets)."""
    text(value, where)
    if value and value.count("[") + value.count("{") > MAX_DEPTH and _json_depth(value) > MAX_DEPTH:
        raise _Bad(f"{where} nests deeper than {MAX_DEPTH} levels")


def _json_depth(value: str) -> int:
    """How deep JSON text nests, brackets inside its strings (a range's name) not counted."""
    depth = deepest = 0
    in_string = escaped = False
    for char in value:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


_OPS = {**{c: optional(integer) for c in _OP_INT}, **{c: optional(text) for c in _OP_TEXT},
        **{c: optional(count) for c in ("time_ns", "bytes_moved", "fallback_calls")},
        **{c: optional(name) for c in NAME_COLUMNS},
        "fallback_ops": optional(_fallback_ops), "device_time_ns": optional(number),
        "shapes": optional(_json_text), "ranges": optional(_json_text)}


def _too_deep(value, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest deeper than ``limit`` (iterative: the check itself cannot overflow)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


def _nesting(data: dict) -> None:
    # op columns of known names hold scalars (checked below); walk everything else
    ops = data.get("ops")
    rest = {k: v for k, v in data.items() if k != "ops"}
    if isinstance(ops, dict):
        rest["ops"] = {k: v for k, v in ops.items() if k not in _OPS}
    if _too_deep(rest):
        raise _Bad(f"it nests deeper than {MAX_DEPTH} levels")


def check_session_dict(data: dict, newest_version: int) -> None:
    """Raise :class:`SessionFileError` unless ``data`` (a parsed session file) is safe to read."""
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SessionFileError(f"format_version should be a whole number from 1, not {_type_name(version)}")
    if version > newest_version:
        raise SessionFileError(f"session format {version} is newer than this dmlprof understands",
                               remedy="upgrade dmlprof")
    try:
        _nesting(data)
        optional(META)(data.get("meta"), "meta")
        _columns(data.get("ops"), "ops", _OPS)
        _columns(data.get("profiler_ops"), "profiler_ops", _PROFILER_OPS)
        optional(EXTRAS)(data.get("extras"), "extras")
    except _Bad as bad:
        raise SessionFileError(f"not a valid session: {bad}") from None
