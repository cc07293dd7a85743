"""Read what one dispatch key resolves to for every aten overload.

This file is self-contained (it imports only torch and the standard library)
because the extraction tool runs it as a script inside a separate venv that
need not have dmlprof installed. :func:`read_dispatch_table` is also what
``dmlprof.tables.live_table`` calls in-process.

The dispatcher's computed table is the truth: ``_dispatch_dump_table`` names,
per dispatch key, the kernel the key resolves to and why ("[kernel]",
"[backend fallback]", "[default backend kernel]", "[math kernel]"). Each
reading is cross-checked against the registration queries
(``_dispatch_has_kernel_for_dispatch_key``, ``_dispatch_has_backend_fallback``)
so a change in the dump format cannot silently mislabel ops.
"""
from __future__ import annotations

import json
import sys

# The computed entry's tag in _dispatch_dump_table -> our kind.
TAGS = {
    "[kernel]": "native",
    "[backend fallback]": "fallback",
    "[default backend kernel]": "composite_explicit",
    "[math kernel]": "composite_implicit",
}
MISSING = "missing"
EXPLICIT_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd")
IMPLICIT_KEYS = ("CompositeImplicitAutograd",)


def _has_kernel(torch, op: str, key: str) -> bool:
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op, key))
    except Exception:  # an alias key this torch does not know
        return False


def _expected_kind(torch, op: str, key: str, has_fallback: bool) -> str:
    """The kind the registration queries predict (the dispatcher's precedence order)."""
    if _has_kernel(torch, op, key):
        return "native"
    if any(_has_kernel(torch, op, k) for k in EXPLICIT_KEYS):
        return "composite_explicit"
    if any(_has_kernel(torch, op, k) for k in IMPLICIT_KEYS):
        return "composite_implicit"
    return "fallback" if has_fallback else MISSING


def _dumped_kind(torch, op: str, key: str):
    prefix = key + ":"
    for line in torch._C._dispatch_dump_table(op).splitlines():
        if line.startswith(prefix):
            tag = line[line.rfind("["):].strip()
            return TAGS.get(tag, tag)
    return MISSING


def read_dispatch_table(dispatch_key: str = "PrivateUse1", namespace: str = "aten") -> dict:
    """``{"ops": {op: kind}, "disagreements": [...], "has_backend_fallback": bool}`` for ``dispatch_key``.

    Ops are named in dispatcher spelling (``aten::name`` or ``aten::name.overload``).
    """
    import torch

    key = getattr(torch._C.DispatchKey, dispatch_key)
    has_fallback = bool(torch._C._dispatch_has_backend_fallback(key))
    ops = {}
    disagreements = []
    prefix = namespace + "::"
    for op in sorted(torch._C._dispatch_get_all_op_names()):
        if not op.startswith(prefix):
            continue
        kind = _dumped_kind(torch, op, dispatch_key)
        expected = _expected_kind(torch, op, dispatch_key, has_fallback)
        if kind != expected:
            disagreements.append({"op": op, "dump_table": kind, "registrations": expected})
        ops[op] = kind
    return {"ops": ops, "disagreements": disagreements, "has_backend_fallback": has_fallback}


def registrations(dispatch_key: str) -> list:
    import torch

    return sorted(torch._C._dispatch_get_registrations_for_dispatch_key(dispatch_key))


def _main(argv) -> int:
    """Script mode: ``python _dispatch_read.py PACKAGE_MODULE DISPATCH_KEY``; JSON on stdout.

    Registrations are those the package adds (read before and after importing
    it), so kernels torch itself puts on the key are not counted as the package's.
    """
    import importlib

    import torch

    module, dispatch_key = argv[1], argv[2]
    keys = (dispatch_key, "Autograd" + dispatch_key)
    before = {k: set(registrations(k)) for k in keys}
    importlib.import_module(module)  # registers the backend's kernels; no device call
    after = {k: registrations(k) for k in keys}
    table = read_dispatch_table(dispatch_key)
    table["registrations"] = {k: [r for r in after[k] if r not in before[k]] for k in keys}
    table["torch_version"] = torch.__version__.split("+")[0]
    json.dump(table, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
