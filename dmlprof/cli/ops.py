"""``dmlprof ops [OP]``: what a backend's op table says about an op, or which ops are of a kind.

``--backend dml`` reads the table shipped with dmlprof (read from the real
torch-directml package); mps, xpu and privateuse1 read this machine's running
dispatcher instead. A composite op is followed, by torch's naming, to the op it computes with
(``_foreach_lerp_.Scalar`` -> ``lerp_.Scalar`` -> ``lerp.Scalar_out``), and an op that falls back names
dmlprof's fix for it.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys

LIVE_KEYS = {"mps": "MPS", "xpu": "XPU", "privateuse1": "PrivateUse1"}
EXAMPLES = """examples:
  dmlprof ops lerp                  every overload of lerp, and what DirectML does with each
  dmlprof ops aten::lerp.Scalar_out one overload
  dmlprof ops --fallback            every op torch-directml sends to the CPU
  dmlprof ops --backend mps --json  this machine's MPS table, as JSON
"""


def add_parser(commands) -> None:
    parser = commands.add_parser("ops", help="look ops up in a backend's op table", description=__doc__,
                                 epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("op", nargs="*", help="op names: aten::lerp.Scalar_out, aten.lerp.Scalar_out or lerp.Scalar_out")
    parser.add_argument("--backend", default="dml", choices=["dml", *LIVE_KEYS],
                        help="dml: the shipped torch-directml table (default); others: read live from the dispatcher")
    kinds = parser.add_mutually_exclusive_group()
    for kind in ("native", "fallback", "composite_explicit", "composite_implicit"):
        kinds.add_argument("--" + kind.replace("_", "-"), dest="kind", action="store_const", const=kind,
                           help=f"list every {kind.replace('_', '-')} op")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(handler=run, kind=None)


def _table(backend: str):
    from dmlprof.tables import live_table, load_table

    if backend == "dml":
        return load_table("dml")
    return live_table(LIVE_KEYS[backend])


def run(args) -> int:
    from dmlprof.errors import UsageError
    from dmlprof.tables import normalize_op

    table = _table(args.backend)
    label = table.version_label()
    if args.op:
        if args.kind:
            raise UsageError("give op names or a kind to list, not both")
        found = [_described(table, op, args.backend == "dml") for name in args.op
                 for op in _matches(table, normalize_op(name), label)]
        if args.json:
            print(json.dumps({"table": label, "ops": found}, indent=1))
        else:
            for item in found:
                _print_wrapped(_description_lines(item, label))
            if any(item["reaches"] for item in found):
                print(f"(composites followed by torch's naming; dmlprof scan MODEL --target dml shows what a model "
                      "reaches)", file=sys.stderr)
        return 0
    if args.kind:
        names = table.ops(args.kind)
        if args.json:
            print(json.dumps({"table": label, "kind": args.kind, "count": len(names), "ops": names}, indent=1))
        else:
            print("\n".join(names))
            print(f"{len(names)} {args.kind} ops  [{label}]", file=sys.stderr)
        return 0
    # Neither: the table's summary.
    if args.json:
        print(json.dumps({"table": label, "counts": table.counts, "registrations": {
            key: len(regs) for key, regs in table.registrations.items()}}, indent=1))
    else:
        print(label)
        for kind, count in table.counts.items():
            print(f"  {kind:<20} {count:>5}")
        for key, regs in table.registrations.items():
            print(f"  registered on {key}: {len(regs)}")
    return 0


def _described(table, op: str, directml: bool = False) -> dict:
    """What the table says of ``op``: its kind and meaning, the ops it reaches when it is a composite
    (:meth:`~dmlprof.tables.OpTable.reaches`), and the fix when what it ends at falls back."""
    from dmlprof.replacements.catalog import advice_for
    from dmlprof.tables import MEANINGS

    kind = table.kind(op)
    reaches = [{"op": reached, "how": how, "kind": table.kind(reached)} for reached, how in table.reaches(op)]
    last, last_kind = (reaches[-1]["op"], reaches[-1]["kind"]) if reaches else (op, kind)
    fix = advice_for(last, called=op) if last_kind == "fallback" else None
    found = {"op": op, "kind": kind, "meaning": MEANINGS.get(kind, ""), "reaches": reaches, "fix": fix}
    if directml:  # the measured truth, the rules and the wrong-result classes: what a scan applies
        try:  # the rules are predicates on tensors: they need torch (without it, the table's answer alone)
            from dmlprof.directml.knowledge import describe
        except ImportError:
            found["directml"] = None
        else:
            found["directml"] = describe(op, kind, reaches)
    return found


def _description_lines(item: dict, label: str) -> list:
    """One op's description as text lines, each to be wrapped to the terminal's width."""
    lines = [f"{item['op']}: {item['kind']}  [{label}]", f"  {item['meaning']}"]
    if item["reaches"]:
        steps = " -> ".join(f"{step['op']} ({step['how']})" for step in item["reaches"])
        lines.append(f"  reaches: {steps}: {item['reaches'][-1]['kind']}")
    if item["fix"]:
        lines.append(f"  fix: {item['fix']}")
    return lines + _knowledge_lines(item.get("directml"))


def _print_wrapped(lines: list) -> None:
    """Lines fitted to the terminal's width as scan's and check's are (rules and fixes run to 250 characters);
    a continuation is indented under its line, so each entry still reads as one."""
    from dmlprof.render.format import clean, terminal_width, wrap_line

    width = terminal_width()
    for line in lines:
        print("\n".join(wrap_line(clean(line), width)))


def _knowledge_lines(known) -> list:
    """The measured verdicts, failure rules and wrong-result classes, as text lines."""
    if not known:
        return []
    lines = [f"  a scan says: {known['scan_says']}"] if known["scan_says"] else []
    lines += [f"  reached when traced: {', '.join(known['reached'][:8])}"] if known["reached"] else []
    for m in known["measured"][:12]:
        counts = ", ".join(f"{k} {m[k]}" for k in ("device", "fallback", "raises", "aborts", "wrong") if m[k])
        flag = " (flagged as wrong results where a call is in the class)" if m["flagged_wrong"] else ""
        lines.append(f"  measured {m['op']} {m['dtypes']}: {counts or 'no calls'}{flag}")
    lines += [f"  fails ({j['kind']}) when traced: {j['op']}: {j['message'][:160]}" for j in known["traced_failures"]]
    lines += [f"  rule ({r['kind']}) {r['op']}: {r['class']}" + (f"; evidence: {r['evidence']}" if r["evidence"] else "")
              for r in known["failure_rules"]]
    lines += [f"  wrong-result class {w['op']}: {w['class']}: {w['wrong']}" for w in known["wrong_classes"]]
    return lines


def _matches(table, op: str, label: str) -> list:
    """``op`` itself, or every overload of it (``lerp`` -> ``aten::lerp.Scalar``, ...); else a one-line
    UsageError suggesting close names (difflib) and names that contain it."""
    from dmlprof.errors import UsageError

    if table.kind(op) is not None:
        return [op]
    names = table.ops()
    overloads = [name for name in names if name.split(".", 1)[0] == op]
    if overloads:
        return overloads
    bases = sorted({name.split(".", 1)[0] for name in names})  # aten::lerp for aten::lerp.Scalar_out...
    close = difflib.get_close_matches(op.split(".", 1)[0], bases, n=5, cutoff=0.8)
    query = op.split("::", 1)[-1]
    partial = [base for base in bases if query and query in base and base not in close][:8]
    hint = ", ".join(close + partial)
    raise UsageError(f"{op} is not in the {label} table" + (f"; did you mean {hint}?" if hint else
                     " (check the spelling, or the op is newer than that torch)"))
